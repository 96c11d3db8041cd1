package polygateway_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/polygateway/polygateway"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// A tenant's budget beside the scope's, at 5 USD per million answer
// tokens: a call that may write 800 tokens reserves 4000 micro-USD and fits
// the tenant's half a cent an hour (it then costs what it used); one that
// may write 2000 would reserve 10000 and is refused before any request,
// saying which budget and when its window ends.
func ExampleWithBudget() {
	upstream := fu.New(fu.WithBehavior(fu.OK().WithTokens(3)))
	defer upstream.Close()
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(upstream.Env("LLM", fu.EnvModel("m"))),
		polygateway.WithPricing(polygateway.PricingTable{"m": {InputPer1M: 0, OutputPer1M: 5}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	ctx := context.Background()
	msgs := []polygateway.Message{polygateway.User("Summarise the ticket.")}
	team := polygateway.Budget{Key: "tenant:acme", Limit: 5_000, Window: time.Hour} // half a cent an hour
	for _, most := range []int{800, 2000} {
		resp, err := client.Chat(ctx, msgs, polygateway.WithBudget(team), polygateway.WithMaxTokens(most))
		var u *polygateway.GatewayUnavailableError
		if errors.Is(err, polygateway.ErrBudgetExhausted) && errors.As(err, &u) {
			// u.Budget names the budget; u.RetryAfter is when its window ends.
			fmt.Println(most, "refused by", u.Budget, u.RetryAfter > 0)
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(most, resp.Content)
	}
	// Output:
	// 800 tok0 tok1 tok2
	// 2000 refused by tenant:acme true
}
