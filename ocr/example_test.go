package ocr_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
)

// Two MonkeyOCR servers in one scope: the first is down, so the calls fail
// over to the second; a broken result comes back as ResultInvalidError.
func Example() {
	down := ocrfake.New()
	down.Close() // refuses connections, like a server still loading its model
	server := ocrfake.New()
	defer server.Close()
	server.SetText("Quarterly report\n\nRevenue grew in every region.")

	client, err := ocr.FromEnv("OCR", polygateway.WithEnv(map[string]string{
		"OCR__MONKEY__1__BASE_URL":  down.URL, // the server root, not a /v1 path
		"OCR__MONKEY__1__API_KEY":   "none",
		"OCR__MONKEY__1__MODEL":     "monkey-ocr",
		"OCR__MONKEY__1__TIMEOUT_S": "300",
		"OCR__MONKEY__1__PRIORITY":  "0",
		"OCR__MONKEY__2__BASE_URL":  server.URL,
		"OCR__MONKEY__2__API_KEY":   "none",
		"OCR__MONKEY__2__MODEL":     "monkey-ocr",
		"OCR__MONKEY__2__TIMEOUT_S": "300",
		"OCR__MONKEY__2__PRIORITY":  "1",
		"PGW_LIMITER_BACKEND":       "memory",
		"PGW_BREAKER_BACKEND":       "memory",
		"PGW_CACHE_BACKEND":         "none",
		"PGW_TELEMETRY_BACKEND":     "none",
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()
	png := []byte("\x89PNG\r\n\x1a\n…pixels…")

	fmt.Println(client.CheckHealth(ctx))

	text, err := client.RecognizeText(ctx, png)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q from %s after %v\n", text.Text, text.SourceName, text.Attempts)

	layout, err := client.ParseLayout(ctx, png)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("page sizes:", layout.PageSizes)
	for _, e := range layout.Elements {
		fmt.Printf("page %d %-5s %v\n", e.PageIndex, e.Type, e.BBox)
	}

	server.SetFaults(ocrfake.Faults{DegenerateBBox: true})
	_, err = client.ParseLayout(ctx, png)
	var invalid *polygateway.ResultInvalidError
	fmt.Println(errors.As(err, &invalid), errors.Is(err, ocr.ErrBadGeometry))
	// Output:
	// map[monkey_1:false monkey_2:true]
	// "Quarterly report\n\nRevenue grew in every region." from monkey_2 after [monkey_1 monkey_2]
	// page sizes: [[612 792]]
	// page 0 title [72 60 540 90]
	// page 0 text  [72 110 540 300]
	// page 0 table [72 320 540 600]
	// true true
}
