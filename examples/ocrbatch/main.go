// Command ocrbatch runs the OCR client over a set of generated PNG images:
// for each image RecognizeText and then ParseLayout, against two fake
// MonkeyOCR servers of package ocrfake — monkey_1, preferred but failing
// (every /ocr/text answers 503 and every /parse 500 "CUDA out of memory"),
// and monkey_2, a healthy fallback. It prints per image which source
// answered after which attempts and what came back, then the breaker
// state of each source and the requests each server saw.
//
// The failing server heals after -heal-after images; once its breaker's
// cooldown has passed, one call probes it and the preferred source takes
// the traffic back.
//
//	go run ./examples/ocrbatch
//	go run ./examples/ocrbatch -n 20 -heal-after 0   # never heals
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"strings"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var (
		n         = flag.Int("n", 10, "images to generate")
		healAfter = flag.Int("heal-after", 5, "the failing server heals after this many images (0: never)")
		pause     = flag.Duration("pause", 150*time.Millisecond, "pause between images")
	)
	flag.Parse()

	failing := ocrfake.New()
	defer failing.Close()
	failing.SetFaults(ocrfake.Faults{TextStatus: 503, ParseFailure: "CUDA out of memory"})
	healthy := ocrfake.New()
	defer healthy.Close()

	source := func(n int, url, priority string) map[string]string {
		p := fmt.Sprintf("OCR__MONKEY__%d__", n)
		return map[string]string{p + "BASE_URL": url, p + "API_KEY": "none", p + "MODEL": "monkey-ocr",
			p + "TIMEOUT_S": "60", p + "PRIORITY": priority}
	}
	env := map[string]string{
		"OCR__RETRY__TIER_PATIENCE_S":  "0",   // fail over to tier 1 at once
		"OCR__BREAKER__FAIL_THRESHOLD": "2",   // two failures in a row open monkey_1's circuit
		"OCR__BREAKER__COOLDOWN_S":     "0.5", // then a probe is allowed after 0.5 s
		"PGW_LIMITER_BACKEND":          "memory",
		"PGW_BREAKER_BACKEND":          "memory",
		"PGW_CACHE_BACKEND":            "none",
		"PGW_TELEMETRY_BACKEND":        "none",
	}
	for k, v := range source(1, failing.URL, "0") {
		env[k] = v
	}
	for k, v := range source(2, healthy.URL, "1") {
		env[k] = v
	}
	client, err := ocr.FromEnv("OCR", polygateway.WithEnv(env))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()

	fmt.Println("== health:", client.CheckHealth(ctx))
	fmt.Printf("%-3s %-6s %-9s %-20s %s\n", "#", "op", "source", "attempts", "result")
	failovers := 0
	for i := range *n {
		if *healAfter > 0 && i == *healAfter {
			failing.SetFaults(ocrfake.Faults{})
			fmt.Println("-- monkey_1 heals")
		}
		img, err := pngImage(i)
		if err != nil {
			return err
		}
		// The fake transcribes every upload to its current text; play a
		// real server by making it the text "printed" on image i.
		want := fmt.Sprintf("Delivery note %03d", i)
		failing.SetText(want)
		healthy.SetText(want)

		text, err := client.RecognizeText(ctx, img)
		if err != nil {
			report(i, "text", err)
		} else {
			failovers += count(text.Attempts)
			fmt.Printf("%-3d %-6s %-9s %-20s %q\n", i, "text", text.SourceName, strings.Join(text.Attempts, ","), text.Text)
		}
		layout, err := client.ParseLayout(ctx, img)
		if err != nil {
			report(i, "layout", err)
		} else {
			failovers += count(layout.Attempts)
			types := make([]string, len(layout.Elements))
			for j, e := range layout.Elements {
				types[j] = e.Type
			}
			fmt.Printf("%-3d %-6s %-9s %-20s %d page(s), blocks %v\n", i, "layout", layout.SourceName,
				strings.Join(layout.Attempts, ","), len(layout.PageSizes), types)
		}
		time.Sleep(*pause)
	}

	fmt.Println("== sources")
	for _, s := range client.Sources(ctx) {
		fmt.Printf("%s: tier %d, breaker %s, opened %d time(s)\n", s.Name, s.Priority, s.Breaker.State, s.Breaker.Opens)
	}
	fmt.Println("== requests seen by the servers")
	for _, srv := range []struct {
		name string
		s    *ocrfake.Server
	}{{"monkey_1 (failing)", failing}, {"monkey_2 (healthy)", healthy}} {
		fmt.Printf("%-19s /ocr/text %d, /parse %d, downloads %d\n", srv.name, srv.s.Count(ocrfake.EndpointText),
			srv.s.Count(ocrfake.EndpointParse), srv.s.Count(ocrfake.EndpointDownload))
	}
	fmt.Println("calls that failed over:", failovers)
	return nil
}

// count returns 1 when a call needed more than one attempt.
func count(attempts []string) int {
	if len(attempts) > 1 {
		return 1
	}
	return 0
}

// report prints a failed call with its error class.
func report(i int, op string, err error) {
	var unavailable *polygateway.GatewayUnavailableError
	if errors.As(err, &unavailable) {
		fmt.Printf("%-3d %-6s unavailable (%s), retry after %v\n", i, op, unavailable.Reason, unavailable.RetryAfter.Round(time.Millisecond))
		return
	}
	fmt.Printf("%-3d %-6s error: %v\n", i, op, err)
}

// pngImage draws image i: a 240×80 page with a dark bar per bit of i, so
// that every image has different bytes.
func pngImage(i int) ([]byte, error) {
	img := image.NewGray(image.Rect(0, 0, 240, 80))
	for y := range 80 {
		for x := range 240 {
			c := uint8(250)
			if bar := x / 20; y > 20 && y < 60 && bar < 12 && i>>bar&1 == 1 {
				c = 30
			}
			img.SetGray(x, y, color.Gray{Y: c})
		}
	}
	var buf bytes.Buffer
	err := png.Encode(&buf, img)
	return buf.Bytes(), err
}
