// Package fakeupstream is the former name of the public test fake
// github.com/polygateway/polygateway/polygatewaytest; it only re-exports
// that package's names so that existing code keeps compiling. New code
// imports polygatewaytest.
package fakeupstream

import "github.com/polygateway/polygateway/polygatewaytest"

// Aliases of the polygatewaytest types.
type (
	// Behavior is polygatewaytest.Behavior.
	Behavior = polygatewaytest.Behavior
	// Kind is polygatewaytest.Kind.
	Kind = polygatewaytest.Kind
	// Option is polygatewaytest.Option.
	Option = polygatewaytest.Option
	// RequestInfo is polygatewaytest.RequestInfo.
	RequestInfo = polygatewaytest.RequestInfo
	// Server is polygatewaytest.Server.
	Server = polygatewaytest.Server
	// Attempt is polygatewaytest.Attempt.
	Attempt = polygatewaytest.Attempt
	// EnvOption is polygatewaytest.EnvOption.
	EnvOption = polygatewaytest.EnvOption
)

// Constants of polygatewaytest.
const (
	// DefaultTokens is polygatewaytest.DefaultTokens.
	DefaultTokens = polygatewaytest.DefaultTokens
	// PromptTokens is polygatewaytest.PromptTokens.
	PromptTokens = polygatewaytest.PromptTokens
	// DefaultModel is polygatewaytest.DefaultModel.
	DefaultModel = polygatewaytest.DefaultModel
	// DefaultBodyHistory is polygatewaytest.DefaultBodyHistory.
	DefaultBodyHistory = polygatewaytest.DefaultBodyHistory
)

// Functions of polygatewaytest; Start is polygatewaytest.NewServer.
var (
	New                  = polygatewaytest.New
	Start                = polygatewaytest.NewServer
	OK                   = polygatewaytest.OK
	Status               = polygatewaytest.Status
	RateLimited          = polygatewaytest.RateLimited
	ServerError          = polygatewaytest.ServerError
	BadKey               = polygatewaytest.BadKey
	ContextLength        = polygatewaytest.ContextLength
	ContentFilter        = polygatewaytest.ContentFilter
	InsufficientQuota    = polygatewaytest.InsufficientQuota
	Reset                = polygatewaytest.Reset
	Hang                 = polygatewaytest.Hang
	CutAfter             = polygatewaytest.CutAfter
	StallAfter           = polygatewaytest.StallAfter
	MalformedAt          = polygatewaytest.MalformedAt
	ErrorEvent           = polygatewaytest.ErrorEvent
	WithScript           = polygatewaytest.WithScript
	WithBehavior         = polygatewaytest.WithBehavior
	WithFunc             = polygatewaytest.WithFunc
	WithFlap             = polygatewaytest.WithFlap
	WithConcurrencyLimit = polygatewaytest.WithConcurrencyLimit
	WithBodyHistory      = polygatewaytest.WithBodyHistory
	WithHandler          = polygatewaytest.WithHandler
	WithModel            = polygatewaytest.WithModel
	WithModels           = polygatewaytest.WithModels
	WithEmbeddingDim     = polygatewaytest.WithEmbeddingDim
	WithAttemptLog       = polygatewaytest.WithAttemptLog
)
