package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/moonmq/moonmq/internal/cli"
)

// parseFlags parses args into fs. A mistake is reported in one line — what
// was wrong, what was expected, the nearest flag to an unknown one, and
// where the flags are listed — rather than with the whole usage text;
// --help prints the usage.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	err := cli.Parse(fs, args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	fmt.Fprintf(stderr, "%s: %v (%s --help lists the flags)\n", fs.Name(), err, fs.Name())
	return errUsage
}
