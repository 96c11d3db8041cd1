// Package ocr is the OcrClient: MonkeyOCR servers (the v1 API of its
// FastAPI server) behind the same governance stack as polygateway's chat
// calls: several sources, selection, retry and failover, rate limits, the
// circuit breaker and telemetry.
//
//	client, err := ocr.FromEnv("OCR")
//	...
//	defer client.Close()
//	text, err := client.RecognizeText(ctx, pngBytes)    // POST /ocr/text
//	layout, err := client.ParseLayout(ctx, pdfBytes)    // POST /parse + the result ZIP
//	health := client.CheckHealth(ctx)                   // GET /health on every source
//
// # Configuration
//
// A scope's sources are configured like any other
// ({SCOPE}__{PROVIDER}__{N}__{FIELD}, see polygateway.FromEnv); OCR has no
// keys of its own. BASE_URL is the server root (http://10.0.0.5:7861), not a
// /v1 path. API_KEY is usually "none". MODEL only labels telemetry rows.
// TIMEOUT_S caps one attempt, both phases of a layout parse together; a
// real /parse can take minutes, so give it room (the original client used
// 300 s). The response cache is always off and the structured-output keys
// have no effect. {SCOPE}__QUALITY__GUARD=true is refused at assembly (it
// judges chat answers and would retry a valid empty transcription), and a
// polygateway.WithFallback cannot stand in for an OCR result (ErrNoResult). Limits of this package (answer, archive and member sizes,
// the health probe timeout, the far-outside tolerance) are in Config.
//
// # Calls
//
// RecognizeText and ParseLayout are each one governed call of the scope's
// engine, with a typed attempt speaking MonkeyOCR (OpText or OpLayout): every
// attempt passes the breaker and the limiter of the source it picked, and
// the call writes one telemetry row with zero usage (OCR has no token
// billing: PromptTokens and CompletionTokens 0, usage_source "measured";
// look at latency). The row's messages column describes the upload (type,
// size, SHA-256), never its bytes; its response column holds the text, or
// a page and element count for a layout.
//
// The upload is a multipart form with one part "file" named image.png,
// image.jpg or document.pdf: the server decides the type by the extension
// alone, so the bytes are sniffed locally and anything but PNG, JPEG or PDF
// is rejected before any call.
//
// ParseLayout posts the document to /parse, downloads the ZIP named by
// download_url (resolved against BASE_URL, every segment escaped, never
// another host) and reads its *_middle.json in memory: PageSizes from each
// page's page_size, Elements from each page's para_blocks in reading order
// (type, bbox, page index; discarded blocks are left out). The ZIP is read
// with bounds (Config.MaxArchiveBytes, MaxMembers, MaxMemberBytes); only
// the middle.json member is decompressed; members are found by suffix,
// subdirectories are tolerated and unsafe names (absolute, "..") ignored.
// The middle.json is read by encoding/json as it is inflated, page by page
// and block by block (what json.Unmarshal reads from the same bytes):
// more pages than Config.MaxLayoutPages or more blocks than
// MaxLayoutBlocks end the reading at once, so a small archive that
// inflates into millions of blocks costs little.
// Boxes are in the units of their page's size (PDF points, or 0.75 × pixels
// for an image without dpi), origin top left; a box that overhangs its page
// is kept: geometry beyond the page is the caller's business.
//
// # Error classes
//
// Every failure is classified once, in the attempt, into polygateway's
// classes; the engine acts on the class only.
//
//	failure                                        class (sentinel)                      governance
//	---------------------------------------------  ------------------------------------  -----------------------------
//	empty, or not PDF/PNG/JPEG bytes (local)       RequestRejectedError                  no call is made
//	refused, reset, TIMEOUT_S exceeded             TransientError                        retry elsewhere; breaker counts
//	5xx (/parse answers 500 for every failure)     TransientError                        retry elsewhere; breaker counts
//	401/403, 429, other 4xx (422: no file part)    by the chat rules (reference-errors)  by class
//	2xx that is not the protocol's JSON            TransientError (malformed)            retry elsewhere
//	"Unsupported file type" (in 200 or 500)        RequestRejectedError                  no retry; breaker: alive
//	200 "success": false, any other message        TransientError (task_failed,          retry elsewhere; breaker: alive
//	  (e.g. "OCR task failed: CUDA out of memory")   wrapping ErrTaskFailed)
//	answer beyond MaxResponseBytes                 ResultInvalidError (ErrTooLarge)      no retry; breaker: alive
//	no or unsafe download_url, not a ZIP,          ResultInvalidError (ErrBadArchive)    no retry; breaker: alive
//	  no *_middle.json in it
//	ZIP, member count or middle.json beyond limit  ResultInvalidError (ErrBadArchive      no retry; breaker: alive
//	                                                 and ErrTooLarge)
//	404 or 410 on the ZIP                          TransientError (archive_not_found)    post again, maybe elsewhere
//	middle.json not JSON, no pages, page_idx       ResultInvalidError (ErrBadLayout)     no retry; breaker: alive
//	  out of sequence
//	more pages or blocks than MaxLayoutPages,      ResultInvalidError (ErrBadLayout      no retry; breaker: alive
//	  MaxLayoutBlocks                                and ErrTooLarge)
//	bad page_size; bbox not 4 finite numbers,      ResultInvalidError (ErrBadGeometry)   no retry; breaker: alive
//	  x2 <= x1, y2 <= y1, or far outside its page
//	caller's context cancelled or expired          CanceledError                         errors.Is(err, ctx.Err()); no row
//
// Why: an HTTP answer proves the server alive, so a business failure inside
// HTTP 200 never charges the breaker. The protocol (the MonkeyOCR server's
// own error handling) calls a failure other than an unsupported type
// transient: it is this server's trouble at this moment (out of GPU
// memory, a crashed worker), so the attempt is a TransientError of Reason
// task_failed and the call fails over to another source, as after a 5xx,
// within the retry budget; the failing server's health score drops, so the
// selector prefers the others, but its circuit stays closed. When every
// attempt failed so, the GatewayUnavailableError wraps the last one
// (errors.Is(err, ErrTaskFailed); PerSource names task_failed). A result
// that can never be read is ResultInvalid; a vanished archive is transient
// because posting again fixes it.
//
// # Health
//
// CheckHealth probes GET /health of every source concurrently with a short
// timeout, directly (no permit, no breaker, no telemetry), and reports
// source name → ok. Use all values true as a start gate; a false names the
// broken endpoint.
package ocr
