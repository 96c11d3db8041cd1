package proxy

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/polygateway/polygateway/core"
)

// Server is the OpenAI-compatible HTTP face of one or more governed
// clients. It is an http.Handler; serve it with HTTPServer or any
// http.Server. All its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	gen     atomic.Pointer[generation]
	limiter *clientLimiter // without client keys
	keyed   *keyLimiter    // with client keys
	bodies  bodyBudget

	keyHashes [][sha256.Size]byte
	keyIDs    []string // by key index: keyID of each key
	// defaultTimeout is RequestTimeout in seconds, as the answer's
	// X-PolyGateway-Timeout header says it.
	defaultTimeout string
	keyBudgets     []core.Budget // by key index; nil without client budgets
	// keyPriorities is each key's default priority, by key index; nil
	// without ClientPriorities.
	keyPriorities []core.Priority
	adminHash     [sha256.Size]byte
	adminOn       bool
	metricsHash   [sha256.Size]byte
	metricsOn     bool

	// hard is cancelled when a Shutdown runs out of time: the calls still
	// running are cancelled.
	hard       context.Context
	hardCancel context.CancelFunc

	calls atomic.Int64 // governed calls being served (MaxInFlight)
	// governing, when set (by tests, before the server serves), sees every
	// chat call as it is handed to its scope's client.
	governing func(*core.Call)

	mu       sync.Mutex // serialises Swap and Shutdown
	shut     bool
	draining atomic.Bool
	retiring sync.WaitGroup // generations waiting to drain and close
	closeMu  sync.Mutex
	closeErr []error
	// held counts, for every client, the generations holding it that have
	// not drained (the current one included); guarded by closeMu.
	held map[io.Closer]int
}

// New builds a server from cfg. The server owns the clients in
// cfg.Backends (see Backends).
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil { // the embedded Backends' check
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, held: map[io.Closer]int{}}
	s.defaultTimeout = strconv.FormatFloat(cfg.RequestTimeout.Seconds(), 'f', -1, 64)
	s.hard, s.hardCancel = context.WithCancel(context.Background())
	for _, k := range cfg.ClientKeys {
		h := sha256.Sum256([]byte(k))
		s.keyHashes, s.keyIDs = append(s.keyHashes, h), append(s.keyIDs, keyID(h))
	}
	if s.keyBudgets, err = cfg.keyBudgets(s.keyHashes); err != nil {
		return nil, err
	}
	if s.keyPriorities, err = cfg.keyPriorities(s.keyHashes); err != nil {
		return nil, err
	}
	if err := s.checkBudgets(&cfg.Backends); err != nil {
		return nil, err
	}
	if cfg.AdminToken != "" {
		s.adminHash, s.adminOn = sha256.Sum256([]byte(cfg.AdminToken)), true
	}
	if cfg.MetricsToken != "" {
		s.metricsHash, s.metricsOn = sha256.Sum256([]byte(cfg.MetricsToken)), true
	}
	s.bodies.max = cfg.MaxBufferedBodyBytes
	switch {
	case cfg.ClientRate > 0 && len(cfg.ClientKeys) > 0:
		s.keyed = newKeyLimiter(len(cfg.ClientKeys), tokenRate{cfg.ClientRate, cfg.ClientBurst},
			tokenRate{cfg.ClientIDRate, cfg.ClientIDBurst}, max(1, cfg.MaxClients/len(cfg.ClientKeys)), cfg.Now)
	case cfg.ClientRate > 0:
		s.limiter = newClientLimiter(cfg.ClientRate, cfg.ClientBurst, cfg.MaxClients, cfg.Now)
	}
	g := newGeneration(cfg.Backends)
	s.hold(g)
	s.gen.Store(g)
	s.cfg.Backends = Backends{} // the generation holds them now
	s.routes()
	return s, nil
}

// HTTPServer returns an http.Server serving s on addr with the configured
// header, read and idle timeouts and header size limit. Its WriteTimeout is
// zero on purpose: the server bounds every write itself (Config.WriteTimeout)
// so that long streams are not cut.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}
