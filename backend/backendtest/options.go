package backendtest

// SuiteOption tells RunLimiterSuite and RunAdmitterSuite about a choice a
// backend has made where the ports allow one.
type SuiteOption func(*suiteOptions)

type suiteOptions struct {
	budgetsPerScope bool
}

func buildSuiteOptions(opts []SuiteOption) suiteOptions {
	var o suiteOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// BudgetsPerScope declares that the backend counts a budget's spend per
// scope, or per pool for the scopes of a pool, instead of across every
// scope that names its key: Redis Cluster does, because every key one
// script touches must lie in one slot. The suites then check that two
// scopes without a pool keep apart and that the scopes of one pool share;
// without the option they check that every scope shares.
func BudgetsPerScope() SuiteOption {
	return func(o *suiteOptions) { o.budgetsPerScope = true }
}
