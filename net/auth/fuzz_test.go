package auth_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/auth"
)

func FuzzParseClientFirst(f *testing.F) {
	for _, s := range []string{"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "y,,n=a=2Cb=3D,r=x", "p=tls-server-end-point,a=u,n=u,r=x,ext=1",
		"n,,m=x,n=u,r=y", "", ",", "n,", "n,,", "p=,,n=u,r=x", "n,a=,n=u,r=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		cf, err := auth.ParseClientFirst(msg)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrAuthFailed)
			return
		}
		require.NotEmpty(t, cf.User)
		require.NotEmpty(t, cf.Nonce)
		require.Equal(t, msg, cf.GS2Header+cf.Bare)
		// A parsed name re-encodes to what was sent (escaping is lossless).
		require.True(t, strings.HasPrefix(cf.Bare, "n="+auth.EncodeSaslName(cf.User)+","))
	})
}

func FuzzParseClientFinal(f *testing.F) {
	for _, s := range []string{"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"c=,r=x,p=", ",p=AA==", "c=biws,r=x,e=1,p=AAAA", "c=biws,p=AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		cf, err := auth.ParseClientFinal(msg)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrAuthFailed)
			return
		}
		require.NotEmpty(t, cf.Proof)
		require.True(t, strings.HasPrefix(msg, cf.WithoutProof+",p="))
	})
}

func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00pw", "a\x00b\x00c", "", "\x00\x00", "x\x00y"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := auth.ParsePlain(msg)
		if err != nil {
			require.ErrorIs(t, err, auth.ErrAuthFailed)
			return
		}
		require.NotEmpty(t, m.User)
		require.NotEmpty(t, m.Password)
		require.Equal(t, string(msg), m.AuthzID+"\x00"+m.User+"\x00"+m.Password)
	})
}

// FuzzScramSession feeds two arbitrary messages to every mechanism's
// session: it must end in success only for a real proof (never here) or
// in ErrAuthFailed, and never panic.
func FuzzScramSession(f *testing.F) {
	f.Add("n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA")
	f.Add("p=tls-exporter,,n=alice,r=abc", "c=cD10bHMtZXhwb3J0ZXIsLA==,r=abc,p=AAAA")
	f.Add("\x00alice\x00alice-secret", "")
	s := newServer(f, auth.Mechanisms[:5]...)
	ci := auth.ConnInfo{TLS: &tls.ConnectionState{Version: tls.VersionTLS12}}
	f.Fuzz(func(t *testing.T, first, final string) {
		for _, mech := range s.Offered(ci) {
			sess, err := s.Start(mech, ci)
			require.NoError(t, err)
			_, done, err := sess.Step([]byte(first))
			if !done {
				require.NoError(t, err)
				_, done, err = sess.Step([]byte(final))
				require.True(t, done)
			}
			if mech == auth.MechPlain && first == "\x00alice\x00alice-secret" {
				require.NoError(t, err)
				continue
			}
			require.True(t, errors.Is(err, auth.ErrAuthFailed), "%s: %v", mech, err)
			require.Empty(t, sess.Principal())
		}
	})
}
