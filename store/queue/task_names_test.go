package queue

import (
	"slices"
	"testing"
)

func TestCloseNames(t *testing.T) {
	t.Parallel()
	names := []string{"billing.charge", "billing.refund", "emails.send", "payments.charge", "reports.build"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"billing.chrage", []string{"billing.charge"}},                    // two letters swapped
		{"Billing.Charge", []string{"billing.charge", "payments.charge"}}, // case, then the same last part
		{"charge", []string{"billing.charge", "payments.charge"}},         // the last part alone
		{"inventory.reserve", nil},
	} {
		if got := CloseNames(tc.name, names, 5); !slices.Equal(got, tc.want) {
			t.Errorf("CloseNames(%q) = %q; want %q", tc.name, got, tc.want)
		}
	}
}
