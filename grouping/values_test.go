package grouping_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redrive/redrive/grouping"
)

// tmpl builds a template of the words of s, split at spaces.
func tmpl(s string, span bool) grouping.Template {
	return grouping.Template{ID: "0123456789abcdef", Tokens: strings.Fields(s), Span: span}
}

func TestTemplateValues(t *testing.T) {
	for _, c := range []struct {
		name     string
		template grouping.Template
		message  string
		want     []string // nil: the message does not fit
	}{
		{"PrefixedIDAndCode",
			tmpl("unsupported currency <CODE> for merchant <*>", false),
			"unsupported currency XBT for merchant acct_1N2b3C4d5E",
			[]string{"XBT", "acct_1N2b3C4d5E"}},
		{"QuotedIDWithoutQuotes",
			tmpl("No such customer <*>", false),
			"No such customer: 'cus_kRglkgEDyJDKRw'",
			[]string{"cus_kRglkgEDyJDKRw"}},
		{"HostAndPortWithoutProsePunctuation",
			tmpl("Error 111 connecting to <*> Connection refused", false),
			"Error 111 connecting to payments-3.eu-west-1:6379. Connection refused.",
			[]string{"payments-3.eu-west-1:6379"}},
		{"QuotedHostAndFieldValue",
			tmpl("HTTPSConnectionPool host <*> port <*> Read timed out", false),
			"HTTPSConnectionPool(host='hooks.zapier.com', port=443): Read timed out.",
			[]string{"hooks.zapier.com", "443"}},
		{"URLWithQueryString",
			tmpl("<*> Server Error Service Unavailable for url <*>", false),
			"503 Server Error: Service Unavailable for url: https://api.example.com/v1/charges/ch_3N?expand=customer&limit=10",
			[]string{"503", "https://api.example.com/v1/charges/ch_3N?expand=customer&limit=10"}},
		{"PathInQuotes",
			tmpl("Errno 28 No space left on device <*>", false),
			"[Errno 28] No space left on device: '/tmp/invoice-88.pdf'",
			[]string{"/tmp/invoice-88.pdf"}},
		{"RunOfDataIsTheMessagesOwnText",
			tmpl("connection from <*> at <*>", false),
			"connection from 82.252.162.81 () at Fri Jun 17 20:55:06 2005",
			[]string{"82.252.162.81", "Fri Jun 17 20:55:06 2005"}},
		{"CommaSeparatedAddresses",
			tmpl("<*> GET <*> status <*> len <*>", false),
			`10.11.21.122,10.11.10.1 "GET /v2/abc/servers/detail?all_tenants=True HTTP/1.1" status: 200 len: 1893`,
			[]string{"10.11.21.122,10.11.10.1", "/v2/abc/servers/detail?all_tenants=True HTTP/1.1", "200", "1893"}},
		{"WordTakenForVariable",
			tmpl("session opened for user <*> by uid <*>", false),
			"session opened for user webmaster by uid 0",
			[]string{"webmaster", "0"}},
		{"MaskedSecretIsItsPlaceholder",
			tmpl("card <*> declined", false),
			"card ••• declined",
			[]string{"•••"}},
		{"DataPartOfAWord",
			tmpl("updateDimmedActivatedHideSensitive overlap:<*>", false),
			"updateDimmedActivatedHideSensitive overlap:false",
			[]string{"false"}},
		{"OnlyTheFirstLine",
			tmpl("Out of memory killed <*>", false),
			"Out of memory: killed pid-4411\nTraceback (most recent call last): ...",
			[]string{"pid-4411"}},
		{"SpanVariableTakesSeveralWords",
			tmpl("<*> close <*> bytes <*> sent <*> bytes <*> received lifetime <*>", true),
			"proxy.example.com:5070 close, 1190 bytes (1.16 KB) sent, 1671 bytes received, lifetime <1 sec",
			[]string{"proxy.example.com:5070", "1190", "1.16 KB", "1671", "", "1 sec"}},
		{"SpanVariableTakesOneWord",
			tmpl("<*> close <*> bytes <*> sent <*> bytes <*> received lifetime <*>", true),
			"proxy.example.com:5070 close, 451 bytes sent, 353 bytes received, lifetime 00:01",
			[]string{"proxy.example.com:5070", "451", "", "353", "", "00:01"}},
		{"NoVariables",
			tmpl("KeyError sku", false),
			"KeyError: 'sku'",
			[]string{}},
		{"OtherConstant",
			tmpl("KeyError sku", false),
			"KeyError: 'quantity'",
			nil},
		{"OtherLength",
			tmpl("session opened for user <*> by uid <*>", false),
			"session opened for user webmaster",
			nil},
		{"FixedWordNeverFillsAVariable",
			tmpl("worker exited signal <*>", false),
			"worker exited: signal 9",
			nil},
		{"SpanVariableTakesAtMostOneWord",
			tmpl("<*> close <*> bytes <*> sent", true),
			"proxy:5070 close, 1190 bytes of many more words sent",
			nil},
		{"SpanConstantsInOrder",
			tmpl("<*> close <*> bytes <*> sent", true),
			"proxy:5070 sent, 1190 bytes close",
			nil},
		{"EmptyMessage",
			tmpl("<*> timed out", false),
			"",
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := c.template.Values(c.message)
			if c.want == nil {
				if ok {
					t.Fatalf("%q fits %q with values %q", c.message, c.template.Text(), got)
				}
				return
			}
			if !ok {
				t.Fatalf("%q does not fit %q", c.message, c.template.Text())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("values %q, want %q", got, c.want)
			}
			if n := len(c.template.Variables()); len(got) != n {
				t.Errorf("%d values for %d variables", len(got), n)
			}
		})
	}
}

func TestTemplateVariables(t *testing.T) {
	tm := tmpl("<*> charge <CODE> declined onExtend:<*> <*>::syncPowerState", false)
	if got, want := tm.Variables(), []int{0, 2, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("Variables() = %v, want %v", got, want)
	}
	if got, want := tm.Text(), "<*> charge <CODE> declined onExtend:<*> <*>::syncPowerState"; got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
	parts := tm.Parts()
	var b strings.Builder
	for _, p := range parts {
		if p.Var >= 0 {
			fmt.Fprintf(&b, "{%d}", p.Var)
		}
		b.WriteString(p.Text)
	}
	if got, want := b.String(), "{0} charge {1} declined onExtend:{2} {3}::syncPowerState"; got != want {
		t.Errorf("Parts() = %q, want %q", got, want)
	}
	got, ok := tm.Values("ord_XBBATYEZ42 charge EUR declined onExtend:1514 AirPort_Brcm43xx::syncPowerState")
	if want := []string{"ord_XBBATYEZ42", "EUR", "1514", "AirPort_Brcm43xx"}; !ok || !slices.Equal(got, want) {
		t.Errorf("Values = %q, %v; want %q", got, ok, want)
	}
}

// Every letter of the labelled corpus fits the template of the group the
// Grouper put it in, and its values are its own words: what the group page
// counts, and what a split by a variable's value reads.
func TestValuesOfLearnedGroups(t *testing.T) {
	letters := loadCorpus(t, corpusPath)
	g := grouping.New(nil)
	ids := make([]string, len(letters))
	for i, l := range letters {
		id, err := g.Group(context.Background(), grouping.Letter{Task: l.Task, Class: l.Class, Message: l.Message, Traceback: l.Traceback})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	ids = g.Resolve(ids)
	templates := map[string]grouping.Template{}
	for _, tm := range g.Templates() {
		templates[tm.ID] = tm
	}
	withValues := 0
	for i, l := range letters {
		tm, ok := templates[ids[i]]
		if !ok {
			t.Fatalf("letter %d: no template for its group %s", i, ids[i])
		}
		values, ok := tm.Values(l.Message)
		if !ok {
			t.Errorf("letter %d (%s): %q does not fit its group's template %q", i, l.Failure, l.Message, tm.Text())
			continue
		}
		if len(values) != len(tm.Variables()) {
			t.Errorf("letter %d: %d values for the %d variables of %q", i, len(values), len(tm.Variables()), tm.Text())
		}
		for _, v := range values {
			if !strings.Contains(l.Message, v) {
				t.Errorf("letter %d: value %q is not in %q", i, v, l.Message)
			}
		}
		if len(values) > 0 {
			withValues++
		}
	}
	if withValues < len(letters)/2 {
		t.Errorf("only %d of %d letters have values", withValues, len(letters))
	}
}
