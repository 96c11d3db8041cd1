package redisstore_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// go-redis logs failed dials through its own logger; the outage tests
	// cause thousands on purpose.
	redis.SetLogger(&logging.VoidLogger{})
	code := m.Run()
	if testCluster != nil { // started by a test that needed it (needCluster)
		testCluster.stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
