package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redis/go-redis/v9/logging"
)

func TestMain(m *testing.M) {
	// go-redis logs failed dials through its own logger; the outage tests
	// cause thousands on purpose.
	redis.SetLogger(&logging.VoidLogger{})
	goleak.VerifyTestMain(m)
}
