package fairqueue_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// ExampleQueue shows the owner's side: calls that found the gates full
// queue; each unit that frees is handed to the next by class, then by
// tenant in turn, then by arrival.
func ExampleQueue() {
	var mu sync.Mutex // the owner's lock: it also guards its counts
	q := fairqueue.New(fairqueue.Config{}, core.SystemClock{}, &mu, nil)
	mu.Lock()
	defer mu.Unlock()
	for _, c := range []struct {
		class  core.Priority
		tenant string
	}{
		{core.PriorityBatch, "etl"},
		{core.PriorityNormal, "team-a"},
		{core.PriorityNormal, "team-a"},
		{core.PriorityNormal, "team-b"},
		{core.PriorityInteractive, "chat"},
	} {
		w, err := q.Enqueue(c.class, c.tenant, time.Time{}, 0)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("#%d %s/%s queued\n", w.ID(), c.class, c.tenant)
	}
	for q.Busy() {
		w := q.Hand("source-1") // a slot of source-1 freed: reserved for w
		fmt.Printf("slot to #%d (%s)\n", w.ID(), w.Class())
		q.Admitted(w) // w took it
	}
	// Output:
	// #1 batch/etl queued
	// #2 normal/team-a queued
	// #3 normal/team-a queued
	// #4 normal/team-b queued
	// #5 interactive/chat queued
	// slot to #5 (interactive)
	// slot to #2 (normal)
	// slot to #4 (normal)
	// slot to #3 (normal)
	// slot to #1 (batch)
}
