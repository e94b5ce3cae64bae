package auth

import (
	"crypto/pbkdf2"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// ScramClient is the client side of SCRAM, with channel binding: franz-go's
// SCRAM has no -PLUS, so the toolkit and the tests use this one. Step is
// called with nil first (it returns client-first), then with the server's
// messages.
type ScramClient struct {
	User, Password string
	// Mechanism is SCRAM-SHA-256/512 or their -PLUS.
	Mechanism string
	// CBName and CBData bind a -PLUS exchange (BindingData computes the
	// data from the client's view: the server's leaf certificate, or the
	// exporter); CBFlag "y" says the client could bind but does not think
	// the server can (no -PLUS seen). Empty: "n".
	CBName string
	CBData []byte
	CBFlag string
	// Nonce is the client nonce; empty picks a random one.
	Nonce string

	step      int
	gs2       string
	bare      string
	serverSig []byte
	credMech  string
}

// Step returns the next client message; done is true after the server's
// final message was verified.
func (c *ScramClient) Step(in []byte) (out []byte, done bool, err error) {
	switch c.step {
	case 0:
		c.step = 1
		c.credMech = strings.TrimSuffix(c.Mechanism, "-PLUS")
		if metadata.ScramHash(c.credMech) == nil {
			return nil, false, fmt.Errorf("scram client: unknown mechanism %q", c.Mechanism)
		}
		if c.Nonce == "" {
			c.Nonce = randomNonce()
		}
		switch {
		case c.CBName != "":
			c.gs2 = "p=" + c.CBName + ",,"
		case c.CBFlag == "y":
			c.gs2 = "y,,"
		default:
			c.gs2 = "n,,"
		}
		c.bare = "n=" + EncodeSaslName(c.User) + ",r=" + c.Nonce
		return []byte(c.gs2 + c.bare), false, nil
	case 1:
		c.step = 2
		return c.final(string(in))
	case 2:
		c.step = 3
		v, ok := strings.CutPrefix(string(in), "v=")
		if !ok {
			return nil, false, fmt.Errorf("scram client: server-final %q", in)
		}
		sig, err := base64.StdEncoding.DecodeString(v)
		if err != nil || subtle.ConstantTimeCompare(sig, c.serverSig) != 1 {
			return nil, false, errors.New("scram client: the server's signature is wrong (it does not know the credential)")
		}
		return nil, true, nil
	}
	return nil, false, errors.New("scram client: exchange over")
}

func (c *ScramClient) final(serverFirst string) ([]byte, bool, error) {
	var nonce, salt string
	iters := -1
	for _, a := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			salt = a[2:]
		case strings.HasPrefix(a, "i="):
			iters, _ = strconv.Atoi(a[2:])
		}
	}
	s, err := base64.StdEncoding.DecodeString(salt)
	switch {
	case !strings.HasPrefix(nonce, c.Nonce) || len(nonce) == len(c.Nonce):
		return nil, false, errors.New("scram client: the server's nonce does not extend ours")
	case err != nil || len(s) == 0:
		return nil, false, errors.New("scram client: bad salt")
	case iters < metadata.MinScramIterations || iters > metadata.MaxScramIterations:
		return nil, false, fmt.Errorf("scram client: %d iterations out of range", iters)
	}
	h := metadata.ScramHash(c.credMech)
	salted, err := pbkdf2.Key(h, c.Password, s, iters, h().Size())
	if err != nil {
		return nil, false, err
	}
	clientKey := hmacSum(h, salted, "Client Key")
	sh := h()
	sh.Write(clientKey)
	storedKey := sh.Sum(nil)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString(append([]byte(c.gs2), c.CBData...)) + ",r=" + nonce
	authMessage := c.bare + "," + serverFirst + "," + withoutProof
	proof := make([]byte, len(clientKey))
	subtle.XORBytes(proof, clientKey, hmacSum(h, storedKey, authMessage))
	c.serverSig = hmacSum(h, hmacSum(h, salted, "Server Key"), authMessage)
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), false, nil
}
