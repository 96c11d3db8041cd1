package polygateway

import "github.com/polygateway/polygateway/core"

// SourceStatus is a read-only snapshot of one source, as Sources reports it
// (go doc core.SourceStatus). It never contains the API key.
type SourceStatus = core.SourceStatus
