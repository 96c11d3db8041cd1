package transport

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
)

func TestClassifyResponse(t *testing.T) {
	t.Parallel()
	const (
		transient = "transient"
		dead      = "dead"
		rejected  = "rejected"
	)
	tests := []struct {
		name     string
		provider string
		status   int
		headers  []string
		body     string
		class    string
		reason   core.Reason
		code     string
		msg      string // substring of Message
		retry    time.Duration
	}{
		{"429 rate limit with retry-after", "openai", 429, []string{"Retry-After", "2"},
			`{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			transient, core.ReasonRateLimited, "rate_limit_exceeded", "Rate limit reached", 2 * time.Second},
		{"429 retry-after-ms wins", "openai", 429, []string{"Retry-After", "9", "Retry-After-Ms", "1500"},
			`{"error":{"message":"slow down","type":null,"code":"rate_limit_exceeded"}}`,
			transient, core.ReasonRateLimited, "rate_limit_exceeded", "slow down", 1500 * time.Millisecond},
		{"429 without any hint", "openai", 429, nil, `{"error":{"message":"slow down"}}`,
			transient, core.ReasonRateLimited, "", "slow down", 0},
		{"429 retry-after beyond a duration is capped, not dropped", "openai", 429, []string{"Retry-After", "99999999999"}, `{"error":{"message":"slow down"}}`,
			transient, core.ReasonRateLimited, "", "slow down", DefaultMaxRetryAfter},
		{"429 insufficient_quota", "openai", 429, nil,
			`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			dead, "", "insufficient_quota", "exceeded your current quota", 0},
		{"429 insufficient_quota is a throttle on dashscope", "qwen", 429, []string{"Retry-After", "1"},
			`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"},"request_id":"r1"}`,
			transient, core.ReasonRateLimited, "insufficient_quota", "quota", time.Second},
		{"429 zhipu 1113 arrears", "zhipu", 429, nil, `{"error":{"code":"1113","message":"您的账户已欠费，请充值后重试。"}}`,
			dead, "", "1113", "欠费", 0},
		{"429 zhipu 1302 concurrency", "glm", 429, nil, `{"error":{"code":"1302","message":"您当前使用该API的并发数过高"}}`,
			transient, core.ReasonRateLimited, "1302", "并发", 0},
		{"429 request too large", "openai", 429, nil,
			`{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 50000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			rejected, "", "request_too_large", "Request too large", 0},
		{"429 moonshot quota", "kimi", 429, nil, `{"error":{"message":"Your account is suspended","type":"exceeded_current_quota_error"}}`,
			dead, "", "exceeded_current_quota_error", "suspended", 0},
		{"429 moonshot overloaded", "moonshot", 429, nil, `{"error":{"message":"The engine is currently overloaded","type":"engine_overloaded_error"}}`,
			transient, core.ReasonRateLimited, "engine_overloaded_error", "overloaded", 0},
		{"429 x-should-retry false", "openai", 429, []string{"X-Should-Retry", "false"}, `{"error":{"message":"no"}}`,
			dead, "", "", "no", 0},
		{"401", "openai", 401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			dead, "", "invalid_api_key", "Incorrect API key", 0},
		{"403", "openai", 403, nil, `{"error":{"message":"forbidden","code":"unsupported_country_region_territory"}}`,
			dead, "", "unsupported_country_region_territory", "forbidden", 0},
		{"403 content filter", "openai", 403, nil, `{"error":{"message":"blocked","code":"content_filter"}}`,
			rejected, "", "content_filter", "blocked", 0},
		{"402 deepseek balance", "deepseek", 402, nil, `{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`,
			dead, "", "invalid_request_error", "Insufficient Balance", 0},
		{"400 dashscope arrearage", "dashscope", 400, nil, `{"error":{"code":"Arrearage","message":"Access denied, please make sure your account is in good standing.","type":"Arrearage"},"request_id":"r"}`,
			dead, "", "Arrearage", "good standing", 0},
		{"400 context_length_exceeded", "openai", 400, nil,
			`{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			rejected, "", "context_length_exceeded", "maximum context length", 0},
		{"400 deepseek context by message", "deepseek", 400, nil,
			`{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (70000 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			rejected, "", CodeContextLength, "maximum context length", 0},
		{"400 zhipu prompt too long", "zhipu", 400, nil, `{"error":{"code":"1261","message":"Prompt 超长"}}`,
			rejected, "", "1261", "超长", 0},
		{"400 azure content filter", "azure", 400, nil,
			`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}`,
			rejected, "", "content_filter", "content management policy", 0},
		{"400 content_policy_violation", "openai", 400, nil, `{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","code":"content_policy_violation"}}`,
			rejected, "", "content_policy_violation", "safety system", 0},
		{"400 dashscope data_inspection_failed", "qwen", 400, nil, `{"error":{"code":"data_inspection_failed","param":null,"message":"Input data may contain inappropriate content.","type":"data_inspection_failed"},"id":"x","request_id":"y"}`,
			rejected, "", "data_inspection_failed", "inappropriate", 0},
		{"400 zhipu content filter 1301", "zhipu", 400, nil, `{"error":{"code":"1301","message":"系统检测到输入或生成内容可能包含不安全或敏感内容"}}`,
			rejected, "", "1301", "敏感", 0},
		{"400 plain", "openai", 400, nil, `{"error":{"message":"Invalid value for 'temperature'","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
			rejected, "", "invalid_value", "temperature", 0},
		{"400 vllm flat integer code", "vllm", 400, nil, `{"object":"error","message":"bad sampling params","type":"BadRequestError","param":null,"code":400}`,
			rejected, "", "400", "bad sampling", 0},
		{"400 ollama null code", "ollama", 400, nil, `{"error":{"message":"invalid model","type":"invalid_request_error","param":null,"code":null}}`,
			rejected, "", "invalid_request_error", "invalid model", 0},
		{"404", "openai", 404, nil, `{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`,
			rejected, "", "model_not_found", "does not exist", 0},
		{"404 fastapi detail", "vllm", 404, nil, `{"detail":"Not Found"}`,
			rejected, "", "", "Not Found", 0},
		{"413", "openai", 413, nil, `<html><head><title>413 Request Entity Too Large</title></head><body>nginx</body></html>`,
			rejected, "", "", "413 Request Entity Too Large", 0},
		{"422", "openai", 422, nil, `{"error":{"message":"unprocessable"}}`, rejected, "", "", "unprocessable", 0},
		{"409 x-should-retry true", "openai", 409, []string{"X-Should-Retry", "true"}, `{"error":{"message":"conflict"}}`,
			transient, core.ReasonNetworkError, "", "conflict", 0},
		{"408", "openai", 408, nil, ``, transient, core.ReasonTimeout, "", "", 0},
		{"500 json", "openai", 500, nil, `{"error":{"message":"The server had an error","type":"server_error"}}`,
			transient, core.ReasonServerError, "server_error", "server had an error", 0},
		{"502 html", "openai", 502, nil, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body><center><h1>502 Bad Gateway</h1></center></body></html>",
			transient, core.ReasonServerError, "", "502 Bad Gateway", 0},
		{"503 retry-after date", "openai", 503, []string{"Retry-After", "DATE+3"}, `upstream overloaded`,
			transient, core.ReasonServerError, "", "upstream overloaded", 3 * time.Second},
		{"529 anthropic-style overloaded", "minimax", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			transient, core.ReasonServerError, "overloaded_error", "Overloaded", 0},
		{"500 x-should-retry false", "openai", 500, []string{"X-Should-Retry", "false"}, `{"error":{"message":"bad input crashed us"}}`,
			rejected, "", "", "bad input", 0},
		{"error string", "openai", 400, nil, `{"error":"model is required"}`, rejected, "", "", "model is required", 0},
		{"empty body 400", "openai", 400, nil, ``, rejected, "", "", "", 0},
		{"minimax anthropic 429", "minimax", 429, nil, `{"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}`,
			transient, core.ReasonRateLimited, "rate_limit_error", "rate limited", 0},
	}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	profiles := DefaultProfiles()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				v := tt.headers[i+1]
				if v == "DATE+3" {
					v = now.Add(3 * time.Second).Format(http.TimeFormat)
				}
				h.Set(tt.headers[i], v)
			}
			src := &core.SourceConfig{Name: tt.provider + "_1", Provider: tt.provider, APIKey: testKey}
			prof := ProfileFor(profiles, tt.provider)
			err := classifyResponse(src, &prof, tt.status, h, parseEnvelope([]byte(tt.body)), DefaultMaxRetryAfter, now)
			if !errors.Is(err, core.ErrGateway) {
				t.Fatalf("err %v does not match ErrGateway", err)
			}
			var (
				source, code, msg string
				status            int
			)
			switch tt.class {
			case transient:
				e := asTransient(t, err)
				if e.Reason != tt.reason {
					t.Errorf("reason = %q, want %q", e.Reason, tt.reason)
				}
				if e.RetryAfter != tt.retry {
					t.Errorf("retry after = %v, want %v", e.RetryAfter, tt.retry)
				}
				source, code, msg, status = e.Source, e.Code, e.Message, e.StatusCode
			case dead:
				e := asDead(t, err)
				source, code, msg, status = e.Source, e.Code, e.Message, e.StatusCode
			case rejected:
				e := asRejected(t, err)
				source, code, msg, status = e.Source, e.Code, e.Message, e.StatusCode
			}
			if source != tt.provider+"_1" || status != tt.status {
				t.Errorf("source/status = %q/%d", source, status)
			}
			if code != tt.code {
				t.Errorf("code = %q, want %q", code, tt.code)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", msg, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "polygateway: ") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestClassifyExported(t *testing.T) {
	t.Parallel()
	src := &core.SourceConfig{Name: "openai_1", APIKey: testKey}
	err := ClassifyResponse(src, openAIProfile(), 429, http.Header{"Retry-After": {"3"}}, []byte(`{"error":{"code":"rate_limit_exceeded"}}`))
	if e := asTransient(t, err); !e.IsRateLimit() || e.RetryAfter != 3*time.Second {
		t.Fatalf("%+v", e)
	}
}

func TestClassifyRedactsAndBounds(t *testing.T) {
	t.Parallel()
	src := &core.SourceConfig{Name: "openai_1", APIKey: testKey}
	body := `{"error":{"message":"Incorrect API key provided: ` + testKey + `. ` + strings.Repeat("long ", 1000) + `","code":"invalid_api_key ` + testKey + `"}}`
	err := ClassifyResponse(src, openAIProfile(), 401, nil, []byte(body))
	e := asDead(t, err)
	if strings.Contains(err.Error(), testKey) || strings.Contains(e.Message, testKey) || strings.Contains(e.Code, testKey) {
		t.Fatalf("key leaked: %q", err.Error())
	}
	if !strings.Contains(e.Message, redact.Mark) {
		t.Fatalf("message = %q, want redaction mark", e.Message)
	}
	if len(e.Message) > maxMessageBytes+len("…") {
		t.Fatalf("message not bounded: %d bytes", len(e.Message))
	}
}

func TestParseEnvelopeShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body           string
		code, typ, msg string
		status         int
		json           bool
	}{
		{`{"error":{"message":"m","type":"t","param":null,"code":"c"}}`, "c", "t", "m", 0, true},
		{`{"error":{"message":"m","type":null,"code":429}}`, "429", "", "m", 429, true},
		{`{"object":"error","message":"m","type":"BadRequestError","param":null,"code":400}`, "400", "BadRequestError", "m", 400, true},
		{`{"type":"error","error":{"type":"rate_limit_error","message":"m"}}`, "", "rate_limit_error", "m", 0, true},
		{`{"base_resp":{"status_code":1004,"status_msg":"login fail"}}`, "1004", "", "login fail", 0, true},
		{`{"error":{"code":"1301","message":"m"}}`, "1301", "", "m", 0, true},
		{`{"code":"InvalidParameter","message":"m","request_id":"r"}`, "InvalidParameter", "", "m", 0, true},
		{`{"error":{"message":"m","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`, "content_filter", "", "m", 400, true},
		{"<!DOCTYPE html><html><body><h1>Bad   gateway</h1></body></html>", "", "", "Bad gateway", 0, false},
		{"  plain\ttext  ", "", "", "plain text", 0, false},
		{`{"error": {"message": "unterminated`, "", "", `{"error": {"message": "unterminated`, 0, false},
	}
	for _, tt := range tests {
		e := parseEnvelope([]byte(tt.body))
		if e.code != tt.code || e.typ != tt.typ || e.message != tt.msg || e.status != tt.status || e.json != tt.json {
			t.Errorf("parseEnvelope(%q) = %+v", tt.body, e)
		}
	}
}

func TestRedactErr(t *testing.T) {
	t.Parallel()
	base := errors.New("dial failed for https://host/v1?key=" + testKey)
	err := redact.New(testKey).Error(base)
	if strings.Contains(err.Error(), testKey) || !errors.Is(err, base) {
		t.Fatalf("Redactor.Error = %v", err)
	}
	if got := RedactKey("abc none def", "none"); got != "abc none def" {
		t.Fatalf("none redacted: %q", got)
	}
}
