package sink

import (
	"context"
	"fmt"
	"strconv"
)

// contentCloudEventsBatch is the media type of a CloudEvents JSON batch: a JSON array of
// CloudEvents in structured mode (the CloudEvents JSON format's "Batched Content Mode").
const contentCloudEventsBatch = "application/cloudevents-batch+json; charset=utf-8"

// eventBatchMax bounds an event batch's body: a lane's events go in POSTs of at most this many
// bytes (an event larger than that alone in its POST).
const eventBatchMax = 1 << 20

// sendEvents POSTs outbox events, a webhook's in mode batch, as CloudEvents batches
// (cloudEvent): each aggregate's events go in one lane, in order, the lanes (at most
// concurrency) at once, a lane's events in POSTs of at most eventBatchMax bytes one after
// another. So one request carries many events while each aggregate's stay in commit order. A
// POST's id (Idempotency-Key, webhook-id) is its first event's id and the number of the others
// ("{id}+{n}"); a receiver deduplicates on each event's id, as a batch that comes again after a
// failure may be cut into other POSTs.
func (w *webhook) sendEvents(ctx context.Context, msgs []Message, bearer string) error {
	lanes := eventLanes(msgs, w.concurrency)
	at := w.now().UTC()
	return each(ctx, len(lanes), w.concurrency, func(ctx context.Context, i int) error {
		lane := lanes[i]
		body := make([]byte, 0, 4096)
		first := 0
		for j, m := range lane {
			ce, err := cloudEvent(m, "", "", at).MarshalJSON() // not json.Marshal, which validates and compacts its output again
			if err != nil {
				return fmt.Errorf("%s: as a CloudEvent: %w", m.About(), err)
			}
			if j > first && len(body)+len(ce)+1 > eventBatchMax {
				if err := w.post(ctx, eventBatch(lane[first:j], body), contentCloudEventsBatch, bearer); err != nil {
					return err
				}
				body, first = body[:0], j
			}
			body = append(append(body, ','), ce...)
		}
		return w.post(ctx, eventBatch(lane[first:], body), contentCloudEventsBatch, bearer)
	})
}

// eventLanes splits msgs into at most n lanes, an aggregate's (a Key's) events all in one lane,
// the lanes taking the aggregates in turn as they first appear; each lane keeps msgs' order.
// groupBy keeps its groups in the order they first appear, which is the lanes' own.
func eventLanes(msgs []Message, n int) [][]Message {
	lane := map[string]int{}
	return groupBy(msgs, func(m Message) int {
		i, ok := lane[m.Key]
		if !ok {
			i = len(lane) % n
			lane[m.Key] = i
		}
		return i
	})
}

// eventBatch is the POST of events, whose CloudEvents body holds, each after a comma: the
// message post sends, named for errors by its first and last event.
func eventBatch(events []Message, body []byte) Message {
	first, last := events[0], events[len(events)-1]
	b := make([]byte, 0, len(body)+1)
	b = append(append(append(b, '['), body[1:]...), ']')
	about := first.About()
	if len(events) > 1 {
		about = fmt.Sprintf("%d events, %s to %s", len(events), first.About(), last.About())
	}
	return Message{
		ID: first.ID + "+" + strconv.Itoa(len(events)-1), Poller: first.Poller, Body: b, FencingToken: first.FencingToken,
		TraceParent: first.TraceParent, TraceState: first.TraceState, about: about,
	}
}
