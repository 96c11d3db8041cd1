package redisstore

import (
	"encoding/json"
	"testing"
)

// FuzzWakeMessage feeds random bytes to the reader of the messages a
// queue's scripts publish to a process. It never panics; what it accepts
// is a message of a known kind, a positive id and no negative time, from
// at most maxWakeMessage bytes, and reads back the same when encoded
// again.
func FuzzWakeMessage(f *testing.F) {
	for _, s := range []string{
		`{"k":"claim","id":12,"lb":"openai-1"}`,
		`{"k":"turn","id":3,"at":1500000}`,
		`{"k":"gone","id":9007199254740993}`,
		`{"k":"ack","id":1}`,
		`{"k":"claim","id":0,"lb":"x"}`,
		`{"k":"turn","id":4,"at":-1}`,
		`{"k":"nope","id":4}`,
		`{"k":"claim","id":1e3}`,
		`{"k":"claim","id":5,"lb":"\u00e9\ud83d\ude00"}`,
		`[1,2]`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		m, err := parseWakeMsg(payload)
		if err != nil {
			return
		}
		if len(payload) > maxWakeMessage || m.ID == 0 || m.At < 0 {
			t.Fatalf("accepted %q as %+v", payload, m)
		}
		switch m.K {
		case "claim", "turn", "gone", "ack":
		default:
			t.Fatalf("accepted kind %q", m.K)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := parseWakeMsg(string(b))
		if err != nil || m2 != m {
			t.Fatalf("%+v encoded as %s reads back as %+v, %v", m, b, m2, err)
		}
	})
}
