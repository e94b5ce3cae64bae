package txncoord

import (
	"context"
	"sync"
)

// IDBlocks hands out producer ids from blocks of IDBlockSize that Reserve
// takes from the cluster metadata (the controller's AllocateProducerIDs),
// so ids stay unique across nodes and restarts without a metadata round
// trip per id. It serves the transaction coordinator (ProducerIDs) and the
// idempotent producers' InitProducerId alike.
type IDBlocks struct {
	// Reserve reserves n consecutive ids and returns the first.
	Reserve func(ctx context.Context, n int64) (int64, error)

	mu         sync.Mutex
	next, last int64 // next id to give, last id of the block (inclusive)
	have       bool
}

// IDBlockSize is how many ids one reservation takes.
const IDBlockSize = 1000

// Next implements ProducerIDs.
func (b *IDBlocks) Next(ctx context.Context) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.have || b.next > b.last {
		first, err := b.Reserve(ctx, IDBlockSize)
		if err != nil {
			return 0, err
		}
		b.next, b.last, b.have = first, first+IDBlockSize-1, true
	}
	id := b.next
	b.next++
	return id, nil
}
