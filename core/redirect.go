package core

import "errors"

// ErrRedirect matches (errors.Is) the failure of an attempt whose source
// answered with a redirect (any 3xx status). Redirects are never followed,
// whoever sends (the built-in transports or a caller's http.Client): a
// redirect to another host would carry the source's credentials there
// (net/http drops Authorization on a cross-host redirect, but not
// Azure's api-key header) and make that host's answer pass for the
// source's, and one to the same host would turn a POST into a GET. The
// attempt is a *TransientError with reason network_error naming the
// source and carrying the 3xx StatusCode; the error text never holds the
// redirect's target.
var ErrRedirect = errors.New("polygateway: transport: redirect refused")
