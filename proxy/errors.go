package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/polygateway/polygateway"
)

// StatusClientClosedRequest is the status logged (never sent) for a request
// whose client went away before the answer: nginx's 499.
const StatusClientClosedRequest = 499

// apiError is an error as the client sees it: an HTTP status and an
// OpenAI-shaped body {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	status     int
	typ        string
	code       string
	param      string
	msg        string
	retryAfter time.Duration
}

// errorBody is the OpenAI error envelope.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) envelope() *errorBody {
	obj := errorObject{Message: e.msg, Type: e.typ}
	if e.param != "" {
		obj.Param = &e.param
	}
	if e.code != "" {
		obj.Code = &e.code
	}
	return &errorBody{Error: obj}
}

func (e *apiError) body() []byte {
	b, _ := json.Marshal(e.envelope())
	return b
}

// retryAfterSeconds renders d for a Retry-After header: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	return strconv.FormatInt(max(s, 1), 10)
}

// writeAPIError sends e as a JSON error response.
func writeAPIError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.retryAfter > 0 || e.status == http.StatusServiceUnavailable || e.status == http.StatusTooManyRequests {
		h.Set("Retry-After", retryAfterSeconds(e.retryAfter))
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body())
}

func invalidRequest(status int, param, code, msg string) *apiError {
	return &apiError{status: status, typ: "invalid_request_error", code: code, param: param, msg: msg}
}

// errShuttingDown is the cause of calls cut by a forced shutdown.
var errShuttingDown = errors.New("server shutting down")

// mapError turns a governed call's error into what the client sees. gone
// reports that the client itself went away (its request context ended):
// then nothing is sent and the status is only logged.
func mapError(err error, gone bool) *apiError {
	var (
		reqErr      *requestError
		rejected    *polygateway.RequestRejectedError
		unavailable *polygateway.GatewayUnavailableError
		invalid     *polygateway.ResultInvalidError
		backend     *polygateway.GovernanceBackendError
		transient   *polygateway.TransientError
		dead        *polygateway.SourceDeadError
	)
	switch {
	case gone:
		return &apiError{status: StatusClientClosedRequest, typ: "client_closed_request", code: "client_closed_request", msg: "client closed the request"}
	case errors.As(err, &reqErr):
		return invalidRequest(http.StatusBadRequest, reqErr.param, reqErr.code, reqErr.msg)
	case errors.Is(err, errShuttingDown), errors.Is(err, polygateway.ErrClientClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_shutting_down", msg: "the gateway is shutting down; retry", retryAfter: time.Second}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusGatewayTimeout, typ: "server_error", code: "timeout", msg: "the governed call was cancelled: " + err.Error()}
	case errors.As(err, &backend):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "governance_backend_unavailable", msg: err.Error(), retryAfter: time.Second}
	case errors.As(err, &unavailable):
		return &apiError{status: http.StatusServiceUnavailable, typ: "service_unavailable_error", code: string(unavailable.Reason), msg: err.Error(), retryAfter: unavailable.RetryAfter}
	case errors.As(err, &rejected):
		code, msg := rejected.Code, rejected.Message
		if code == "" {
			code = "request_rejected"
		}
		if msg == "" {
			msg = err.Error()
		}
		// The provider's error.param names the request field at fault;
		// it reaches the client as OpenAI would send it.
		return invalidRequest(http.StatusBadRequest, rejected.Param, code, msg)
	case errors.As(err, &invalid):
		return &apiError{status: http.StatusUnprocessableEntity, typ: "invalid_response_error", code: "result_invalid", msg: err.Error()}
	case errors.As(err, &transient):
		code := transient.Code
		if code == "" {
			code = string(transient.Reason)
		}
		return &apiError{status: http.StatusBadGateway, typ: "upstream_error", code: code, msg: err.Error(), retryAfter: transient.RetryAfter}
	case errors.As(err, &dead):
		return &apiError{status: http.StatusBadGateway, typ: "upstream_error", code: "source_dead", msg: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error", msg: err.Error()}
}
