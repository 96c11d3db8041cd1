package ocr

import (
	"slices"
	"strings"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/kernel"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxResponseBytes = 32 << 20
	DefaultMaxArchiveBytes  = 64 << 20
	DefaultMaxMemberBytes   = 50 << 20
	DefaultMaxMembers       = 4096
	DefaultHealthTimeout    = 5 * time.Second
	DefaultMaxOutsidePages  = 1.0
	DefaultMaxLayoutPages   = 10_000
	DefaultMaxLayoutBlocks  = 100_000
)

// Config tunes the OCR client. The zero value is valid: every zero field
// takes the default named in its comment.
type Config struct {
	// MaxResponseBytes bounds the JSON answer of /ocr/text and /parse.
	// A larger answer is a ResultInvalidError (ErrTooLarge). Default 32 MiB.
	MaxResponseBytes int64
	// MaxArchiveBytes bounds the downloaded result ZIP of /parse. A larger
	// archive is a ResultInvalidError (ErrBadArchive, ErrTooLarge).
	// Default 64 MiB.
	MaxArchiveBytes int64
	// MaxMemberBytes bounds the uncompressed size of the one member that is
	// decompressed, *_middle.json (no other member is ever inflated). A
	// larger member, declared or actual, is a ResultInvalidError
	// (ErrBadArchive, ErrTooLarge). Default 50 MiB.
	MaxMemberBytes int64
	// MaxMembers bounds the number of entries of the ZIP; more is a
	// ResultInvalidError (ErrBadArchive, ErrTooLarge). Default 4096.
	MaxMembers int
	// HealthTimeout bounds each CheckHealth probe; a source's own TIMEOUT_S
	// caps it further. Default 5 s.
	HealthTimeout time.Duration
	// MaxOutsidePages decides when a box counts as far outside its page: a
	// box that does not meet the page rectangle grown by this many page
	// widths (left and right) and heights (top and bottom) is broken
	// geometry. Boxes that merely overhang the page are kept (what lies
	// beyond the page is the caller's business). Default 1; a negative
	// value turns the check off.
	MaxOutsidePages float64
	// MaxLayoutPages bounds the pages of a *_middle.json that are read:
	// one more is a ResultInvalidError (ErrBadLayout, ErrTooLarge), raised
	// as soon as it is met, before anything more is read. Default 10,000.
	MaxLayoutPages int
	// MaxLayoutBlocks bounds the blocks (para_blocks) built into
	// LayoutResult.Elements, all pages together, and the elements of any
	// other array of a page (preproc_blocks, discarded_blocks, …) that is
	// read and dropped: one more is a ResultInvalidError (ErrBadLayout,
	// ErrTooLarge), raised as soon as it is met. Default 100,000.
	MaxLayoutBlocks int
}

func (c Config) withDefaults() Config {
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxArchiveBytes <= 0 {
		c.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if c.MaxMemberBytes <= 0 {
		c.MaxMemberBytes = DefaultMaxMemberBytes
	}
	if c.MaxMembers <= 0 {
		c.MaxMembers = DefaultMaxMembers
	}
	if c.HealthTimeout <= 0 {
		c.HealthTimeout = DefaultHealthTimeout
	}
	if c.MaxOutsidePages == 0 {
		c.MaxOutsidePages = DefaultMaxOutsidePages
	}
	if c.MaxLayoutPages <= 0 {
		c.MaxLayoutPages = DefaultMaxLayoutPages
	}
	if c.MaxLayoutBlocks <= 0 {
		c.MaxLayoutBlocks = DefaultMaxLayoutBlocks
	}
	return c
}

// Client is the OcrClient: MonkeyOCR servers behind the full governance
// stack (source selection, retry and failover, rate limits, circuit
// breaker, telemetry). It is safe for concurrent use; make one per scope
// and process and Close it at shutdown. Its Admin methods are the
// operators' controls of the scope's sources, as on
// polygateway.GatewayClient.
type Client struct {
	polygateway.Admin
	k   *kernel.Client
	up  *upstream
	cfg Config
}

// FromEnv assembles the OCR client of scope (e.g. "OCR") from the .env file
// and the process environment, or from polygateway.WithEnv's map, exactly
// as polygateway.FromEnv does, with the default Config.
//
// OCR has no keys of its own. Each source's BASE_URL is the server root
// (e.g. http://10.0.0.5:7861), not a /v1 path; API_KEY is usually "none"
// (a real key is sent as a bearer token, for proxies in front of the
// server); MODEL only labels telemetry rows; TIMEOUT_S caps one attempt,
// both phases of a layout parse included (a real /parse can take minutes).
// The response cache is always off, whatever PGW_CACHE_BACKEND says (the
// shared settings loader still requires the key and validates it: "none"
// is the natural value), and the structured-output keys have no effect.
// The caller's options apply, except {SCOPE}__QUALITY__GUARD=true, which is
// refused (it would retry valid empty texts). A polygateway.WithFallback
// cannot stand in for an OCR result: when it answers, the call fails with
// ErrNoResult.
func FromEnv(scope string, opts ...polygateway.Option) (*Client, error) {
	return FromEnvWithConfig(scope, Config{}, opts...)
}

// FromEnvWithConfig is FromEnv with a Config.
func FromEnvWithConfig(scope string, cfg Config, opts ...polygateway.Option) (*Client, error) {
	gc, err := polygateway.FromEnv(scope, withoutCache(opts)...)
	if err != nil {
		return nil, err
	}
	return finish(gc, cfg)
}

// FromSettings assembles the OCR client from parsed settings (see
// polygateway.LoadSettings), with the default Config.
func FromSettings(s polygateway.GatewaySettings, opts ...polygateway.Option) (*Client, error) {
	return FromSettingsWithConfig(s, Config{}, opts...)
}

// FromSettingsWithConfig is FromSettings with a Config.
func FromSettingsWithConfig(s polygateway.GatewaySettings, cfg Config, opts ...polygateway.Option) (*Client, error) {
	gc, err := polygateway.FromSettings(s, withoutCache(opts)...)
	if err != nil {
		return nil, err
	}
	return finish(gc, cfg)
}

// withoutCache returns opts with the response cache turned off: OCR
// results are never cached.
func withoutCache(opts []polygateway.Option) []polygateway.Option {
	return append(opts[:len(opts):len(opts)], func(o *kernel.Options) { o.NoCache = true })
}

// finish checks the settings and completes the client.
func finish(gc *polygateway.GatewayClient, cfg Config) (*Client, error) {
	k, err := kernel.Unwrap(gc)
	if err != nil {
		return nil, err
	}
	if s := k.Settings(); s.Quality.Guard {
		// The guard judges chat answers: it would retry an empty
		// transcription, which is a valid OCR result.
		_ = k.Close()
		return nil, &polygateway.ConfigError{Key: s.Scope + "__QUALITY__GUARD",
			Problem: "the quality guard judges chat answers and would retry valid OCR results (an empty text); turn it off for an OCR scope"}
	}
	if err := checkExtra(*k.Settings()); err != nil {
		_ = k.Close()
		return nil, err
	}
	c := &Client{Admin: gc.Admin, k: k, cfg: cfg.withDefaults()}
	c.up = &upstream{tc: k.Transport(), cfg: c.cfg}
	return c, nil
}

// checkExtra refuses single-part scope keys meant for another client (the
// embedding keys): OCR has no keys of its own, so such a key in an OCR
// scope is a mistake. X_ keys are the user's own.
func checkExtra(s polygateway.GatewaySettings) error {
	var names []string
	for name := range s.Extra {
		if !strings.HasPrefix(name, "X_") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return &polygateway.ConfigError{Key: s.Scope + "__" + names[0],
		Problem: "not a key of an OCR scope: OCR has no keys of its own (this one configures embedding scopes)"}
}

// Scope returns the client's scope name (upper case).
func (c *Client) Scope() string { return c.k.Settings().Scope }
