package controller

import (
	"errors"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// Errors of the controller itself; the errors of metadata requests are
// cluster/metadata's.
var (
	ErrNodeIDMismatch = errors.New("node id does not match the metadata directory")
	// ErrPeersMismatch: the directory was created with another voter set
	// (or as a single node); the message names both.
	ErrPeersMismatch = errors.New("peers do not match the metadata directory")
	// ErrStateBroken is returned once a write to the metadata DB has failed
	// in the FSM; the in-memory state can no longer be trusted to match the
	// log, so the controller refuses further changes until restarted (which
	// replays the log from the last persisted index). It is also returned
	// for a log entry this version cannot read (errNewerEntry): applying
	// the log past it would lose what it said, so the state machine stops
	// there, and a restart with this version stops there again.
	ErrStateBroken = errors.New("controller state machine stopped after a storage failure or an unreadable log entry")

	// errNewerEntry marks a log entry of a version or record type this
	// release does not know: a newer release wrote it (a downgrade).
	errNewerEntry = errors.New("written by a newer MoonMQ; run that version (downgrades are not supported)")
)

// configError makes config failures match both metadata.ErrInvalidConfig
// and topicconfig.ErrInvalid while keeping topicconfig's message (which
// already says what was wrong).
type configError struct{ err error } // err wraps topicconfig.ErrInvalid

func (e *configError) Error() string { return e.err.Error() }

func (e *configError) Is(target error) bool {
	return target == metadata.ErrInvalidConfig || target == topicconfig.ErrInvalid
}

func (e *configError) Unwrap() error { return e.err }

func invalidConfig(err error) error { return &configError{err: err} }
