package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/moonmq/moonmq/net/client"
)

// resolveToolkitSecurity turns the security flags of an MQL command into
// the session's settings. A user without a password is asked for one when
// canPrompt (the interactive console on a terminal), without echo; anywhere
// else it is an error naming --password. Certificate and key files are read
// here, so a wrong path is a usage error naming its flag, not a failed
// first statement.
func resolveToolkitSecurity(f *client.SecurityFlags, canPrompt bool, stderr io.Writer) (client.Security, error) {
	sec, err := f.Resolve(os.Getenv)
	if err != nil {
		return sec, err
	}
	if client.NeedsPassword(sec) {
		if !canPrompt {
			return sec, client.MissingPasswordError(sec)
		}
		pw, err := promptPassword(stderr, sec.User)
		if err != nil {
			return sec, err
		}
		sec.Password = pw
	}
	if err := sec.Validate(); err != nil {
		return sec, err
	}
	if _, err := sec.TLSConfig(); err != nil {
		return sec, err
	}
	return sec, nil
}

// promptPassword reads a password from the terminal on stdin without
// echoing it.
func promptPassword(stderr io.Writer, user string) (string, error) {
	fmt.Fprintf(stderr, "Password for %s: ", user)
	pw, err := term.ReadPassword(int(os.Stdin.Fd()))
	fmt.Fprintln(stderr)
	if err != nil {
		return "", fmt.Errorf("--password: reading the password from the terminal: %w", err)
	}
	if len(pw) == 0 {
		return "", errors.New("--password: empty password")
	}
	return string(pw), nil
}
