package main

import (
	"math"
	"strconv"
	"time"

	"github.com/polygateway/polygateway/proxy"
)

// readOperatorKeys reads the server keys of the request deadline and the
// cache's sharing between client keys into p.
func readOperatorKeys(r *keyReader, p *proxy.Config) error {
	if v, ok := r.get("PGW_REQUEST_TIMEOUT_S"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) || f > math.MaxInt64/float64(time.Second) {
			return configError("PGW_REQUEST_TIMEOUT_S", "want seconds > 0")
		}
		p.RequestTimeout = time.Duration(f * float64(time.Second))
	}
	if v, ok := r.get("PGW_SHARED_CACHE"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return configError("PGW_SHARED_CACHE", "want true or false")
		}
		p.SharedCache = b
	}
	return nil
}
