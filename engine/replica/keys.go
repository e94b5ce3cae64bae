package replica

import (
	"fmt"
	"strings"

	"github.com/moonmq/moonmq/engine/batch"
)

// RecordError names one refused record of a produced batch: its position in
// the batch that was sent (Kafka's ProduceResponse RecordErrors BatchIndex,
// KIP-467), not an offset, and why.
type RecordError struct {
	BatchIndex int32
	Message    string
}

// String is Kafka's RecordError.toString, which its partition-level message
// quotes.
func (e RecordError) String() string {
	return fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.BatchIndex, e.Message)
}

// RecordsRefusedError is a produce refused because of individual records
// (Kafka's RecordValidationException): Unwrap gives the class of the
// refusal (batch.ErrInvalidRecord), Records names the records. Its Error is
// Kafka's partition-level message, so clients that print it see what a
// Kafka broker says.
type RecordsRefusedError struct {
	Err     error
	Records []RecordError
	// Total is how many records were refused; Records holds at most
	// MaxRecordErrors of them.
	Total int
}

// MaxRecordErrors bounds the record errors a refusal carries. Kafka lists
// every refused record; a compressed batch can hold millions of keyless
// records, so MoonMQ names the first MaxRecordErrors and says how many
// there were in the message.
const MaxRecordErrors = 1000

func (e *RecordsRefusedError) Error() string {
	shown := make([]string, 0, 3)
	for _, r := range e.Records[:min(3, len(e.Records))] {
		shown = append(shown, r.String())
	}
	return fmt.Sprintf("One or more records have been rejected due to %d record errors in total, "+
		"and only showing the first three errors at most: [%s]", e.Total, strings.Join(shown, ", "))
}

func (e *RecordsRefusedError) Unwrap() error { return e.Err }

// checkKeys refuses records without a key on a compacted topic, as Kafka's
// LogValidator.validateKey does: the cleaner keeps the latest record per
// key, so a keyless record could never be cleaned and would never be
// superseded. Validation counted them (batch.Validated.NullKeys), so this
// walks a batch again (streaming, as validation does) only to name the
// refused records, on the error path. A compressed batch whose records were not all walked (it decodes
// past batch.MaxValidatedDecoded) cannot be shown to have keys and is
// refused as a whole.
func checkKeys(batches [][]byte, headers []batch.Validated, tp TopicPartition) error {
	for i, h := range headers {
		if !h.Walked {
			return fmt.Errorf("%w: batch %d decodes to more than %d bytes, too much to check that every record has the key a compacted topic requires",
				batch.ErrInvalidRecord, i, batch.MaxValidatedDecoded)
		}
		if h.NullKeys == 0 {
			continue
		}
		msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d", tp.Topic, tp.Partition)
		idx, err := batch.KeylessRecords(batches[i], MaxRecordErrors)
		if err != nil {
			// Validation walked the same bytes: a failure now is a bug,
			// but the produce is refused either way.
			return fmt.Errorf("%w: batch %d: naming its keyless records: %v", batch.ErrInvalidRecord, i, err)
		}
		refused := &RecordsRefusedError{Err: batch.ErrInvalidRecord, Total: int(h.NullKeys)}
		for _, j := range idx {
			refused.Records = append(refused.Records, RecordError{BatchIndex: j, Message: msg})
		}
		return refused
	}
	return nil
}
