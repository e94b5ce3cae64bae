package controller

import (
	"context"
	"encoding/json"
	"fmt"
)

// encodeCommandV1 is the encoder of the previous release, kept to write
// logs in its format: version 1 entries must replay to the same state.
func encodeCommandV1(c *command) ([]byte, error) {
	js, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s command: %w", c.Op, err)
	}
	return append([]byte{commandV1}, js...), nil
}

// proposeV1 commits a version 1 command, as the previous release did.
func (c *Controller) proposeV1(ctx context.Context, cmd *command) (*result, error) {
	data, err := encodeCommandV1(cmd)
	if err != nil {
		return nil, err
	}
	res, _, err := c.proposeEntry(ctx, cmd.Op, data)
	return res, err
}
