package embed

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/config"
)

// Encoding formats accepted by {SCOPE}__ENCODING_FORMAT.
const (
	// EncodingFloat asks for JSON arrays of numbers (the default).
	EncodingFloat = "float"
	// EncodingBase64 asks for base64 strings of little-endian float32
	// values: about a quarter of the bytes of EncodingFloat on the wire.
	EncodingBase64 = "base64"
)

// MaxConcurrency bounds {SCOPE}__CONCURRENCY.
const MaxConcurrency = 64

// Defaults of the per-call input caps ({SCOPE}__MAX_INPUTS and
// {SCOPE}__MAX_INPUT_BYTES).
const (
	// DefaultMaxInputs is OpenAI's limit of inputs per embeddings request.
	DefaultMaxInputs = 2048
	// DefaultMaxInputBytes bounds the summed length of one call's inputs:
	// 2 MiB, above OpenAI's 300,000 tokens per request for ordinary text.
	DefaultMaxInputBytes = 2 << 20
)

// Config is the embedding behaviour of a Client, read from the scope's
// keys (see the package documentation).
type Config struct {
	// BatchSize is the largest number of inputs sent in one request.
	BatchSize int
	// Normalize L2-normalises every vector (a zero vector stays zero).
	Normalize bool
	// ExpectedDim, when > 0, is the length every vector must have.
	ExpectedDim int
	// Concurrency is how many batches of one Embed call are in flight at
	// once (default 1: one after another).
	Concurrency int
	// EncodingFormat is EncodingFloat or EncodingBase64.
	EncodingFormat string
	// MaxInputs is the largest number of texts one Embed call accepts
	// (default DefaultMaxInputs); more is refused before any batch is sent.
	MaxInputs int
	// MaxInputBytes is the largest summed length in bytes of one Embed
	// call's texts (default DefaultMaxInputBytes); more is refused before
	// any batch is sent.
	MaxInputBytes int
}

// Scope keys read by the embedding client, relative to "{SCOPE}__".
const (
	keyBatchSize   = "BATCH_SIZE"
	keyNormalize   = "NORMALIZE"
	keyExpectedDim = "EXPECTED_DIM"
	keyConcurrency = "CONCURRENCY"
	keyEncoding    = "ENCODING_FORMAT"
	keyMaxInputs   = "MAX_INPUTS"
	keyMaxBytes    = "MAX_INPUT_BYTES"
)

var knownKeys = []string{keyBatchSize, keyConcurrency, keyEncoding, keyExpectedDim, keyMaxBytes, keyMaxInputs, keyNormalize}

// parseConfig reads the embedding keys of scope from extra
// (GatewaySettings.Extra). Errors are *polygateway.ConfigError naming the
// full key.
func parseConfig(scope string, extra map[string]string) (Config, error) {
	cfg := Config{Concurrency: 1, EncodingFormat: EncodingFloat, MaxInputs: DefaultMaxInputs, MaxInputBytes: DefaultMaxInputBytes}
	full := func(name string) string { return scope + "__" + name }
	bad := func(name, problem string) error {
		return &polygateway.ConfigError{Key: full(name), Problem: problem}
	}
	v, ok := extra[keyBatchSize]
	if !ok {
		return cfg, bad(keyBatchSize, "missing: an embedding scope needs the number of inputs per request (integer >= 1)")
	}
	n, err := parseCount(v)
	if err != nil {
		return cfg, bad(keyBatchSize, err.Error())
	}
	cfg.BatchSize = n

	if v, ok := extra[keyNormalize]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "1":
			cfg.Normalize = true
		case "false", "0":
			cfg.Normalize = false
		default:
			return cfg, bad(keyNormalize, fmt.Sprintf("invalid value %q: expected true, false, 1 or 0", v))
		}
	}
	if v, ok := extra[keyExpectedDim]; ok {
		n, err := parseCount(v)
		if err != nil {
			return cfg, bad(keyExpectedDim, err.Error())
		}
		cfg.ExpectedDim = n
	}
	if v, ok := extra[keyConcurrency]; ok {
		n, err := parseCount(v)
		if err == nil && n > MaxConcurrency {
			err = fmt.Errorf("invalid value %q: at most %d", v, MaxConcurrency)
		}
		if err != nil {
			return cfg, bad(keyConcurrency, err.Error())
		}
		cfg.Concurrency = n
	}
	if v, ok := extra[keyEncoding]; ok {
		switch f := strings.ToLower(strings.TrimSpace(v)); f {
		case EncodingFloat, EncodingBase64:
			cfg.EncodingFormat = f
		default:
			return cfg, bad(keyEncoding, fmt.Sprintf("invalid value %q: expected float or base64", v))
		}
	}
	for _, k := range []struct {
		name string
		dst  *int
	}{{keyMaxInputs, &cfg.MaxInputs}, {keyMaxBytes, &cfg.MaxInputBytes}} {
		if v, ok := extra[k.name]; ok {
			n, err := parseCount(v)
			if err != nil {
				return cfg, bad(k.name, err.Error())
			}
			*k.dst = n
		}
	}
	unknown := make([]string, 0)
	for k := range extra {
		// X_… keys are the user's own (see the configuration reference).
		if !slices.Contains(knownKeys, k) && !strings.HasPrefix(k, "X_") {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		hint := ""
		if best := config.Suggest(unknown[0], knownKeys); best != "" {
			hint = " (did you mean " + full(best) + "?)"
		}
		return cfg, bad(unknown[0], "not a key of an embedding scope"+hint+" (known: "+strings.Join(knownKeys, ", ")+")")
	}
	return cfg, nil
}

// parseCount parses an integer >= 1.
func parseCount(v string) (int, error) {
	s := strings.TrimSpace(v)
	if s == "" {
		return 0, fmt.Errorf("empty value: expected an integer >= 1")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("invalid value %q: expected an integer >= 1", v)
	}
	return n, nil
}
