package seed

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"
)

// value is a random value a template refers to as {name}. It is drawn once
// per letter, so a letter's message, args and traceback agree (the order
// id in the message is the order id in the args). sample is a typical
// value, used to compute each kind's fingerprint.
type value struct {
	name   string
	draw   func(r *rand.Rand, now time.Time) string
	sample string
}

// oneOf draws one of choices uniformly.
func oneOf(choices ...string) func(r *rand.Rand, _ time.Time) string {
	return func(r *rand.Rand, _ time.Time) string { return choices[r.IntN(len(choices))] }
}

// between draws an integer in [lo, hi], as text.
func between(lo, hi int64) func(r *rand.Rand, _ time.Time) string {
	return func(r *rand.Rand, _ time.Time) string { return fmt.Sprint(lo + r.Int64N(hi-lo+1)) }
}

// money draws an amount of lo to hi units and any cents, as "129.99".
func money(lo, hi int64) func(r *rand.Rand, _ time.Time) string {
	return func(r *rand.Rand, _ time.Time) string {
		return fmt.Sprintf("%d.%02d", lo+r.Int64N(hi-lo+1), r.IntN(100))
	}
}

// hexID draws prefix and a hex number below 2^bits.
func hexID(prefix string, bits uint) func(r *rand.Rand, _ time.Time) string {
	return func(r *rand.Rand, _ time.Time) string { return fmt.Sprintf("%s%x", prefix, r.Uint64N(1<<bits)) }
}

var (
	names   = oneOf("maria.garcia", "james.smith", "li.wei", "fatima.khan", "lukas.muller", "sofia.rossi", "noah.johnson", "amara.okafor", "yuki.tanaka", "olivia.brown", "mateo.silva", "chloe.martin")
	domains = oneOf("gmail.com", "outlook.com", "yahoo.co.uk", "proton.me", "icloud.com", "acme-corp.com", "web.de")
)

// values are the per-letter values. Those used in message templates must
// normalise away completely (see catalog.go).
var values = []value{
	{"order", func(r *rand.Rand, _ time.Time) string { return fmt.Sprintf("ORD-%d", 10000+r.IntN(990000)) }, "ORD-88123"},
	{"amount", money(5, 999), "129.99"},
	{"amount2", money(1, 120), "20.00"},
	{"currency", oneOf("USD", "EUR", "GBP", "CAD", "AUD"), "USD"},
	{"card", func(r *rand.Rand, _ time.Time) string { return fmt.Sprintf("%04d", r.IntN(10000)) }, "4242"},
	{"customer", hexID("cus_", 52), "cus_9f2c41d07ab3e6"},
	{"charge", func(r *rand.Rand, _ time.Time) string { return fmt.Sprintf("ch_3%d", 100000000+r.IntN(900000000)) }, "ch_3512345678"},
	{"request", hexID("req_", 52), "req_5d1e0c9a7b3f42"},
	{"email", func(r *rand.Rand, now time.Time) string {
		return fmt.Sprintf("%s%d@%s", names(r, now), r.IntN(100), domains(r, now))
	}, "maria.garcia7@gmail.com"},
	{"bademail", func(r *rand.Rand, now time.Time) string {
		return names(r, now) + "@" + oneOf("gmail", "hotmail", "outlook")(r, now)
	}, "maria.garcia@gmail"},
	{"user", between(1000, 999999), "48213"},
	{"ip", func(r *rand.Rand, _ time.Time) string { return fmt.Sprintf("10.0.%d.%d", r.IntN(8), 2+r.IntN(253)) }, "10.0.3.17"},
	{"uuid", func(r *rand.Rand, _ time.Time) string {
		a, b := r.Uint64(), r.Uint64()
		return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>48&0x3fff|0x8000, b&0xffffffffffff)
	}, "7c9e6679-7425-40de-944b-e07fc1f90ae7"},
	{"addr", hexID("0x7f", 40), "0x7f3a2c1d9e50"},
	{"sku", func(r *rand.Rand, _ time.Time) string { return fmt.Sprintf("SKU-%d", 1000+r.IntN(9000)) }, "SKU-1042"},
	{"qty", between(3, 12), "4"},
	{"left", between(0, 2), "1"},
	{"warehouse", oneOf("ams-1", "fra-2", "iad-1", "sfo-3"), "ams-1"},
	{"whhost", oneOf("hooks.acme-shop.com", "api.brightlane.io", "webhooks.northwind.dev", "hooks.zapier.com", "integrations.globex.net", "n8n.pixelforge.app", "erp.contoso-retail.com"), "hooks.zapier.com"},
	{"status", oneOf("500", "502", "503", "504"), "503"},
	{"ms", between(200, 30000), "10000"},
	{"event", oneOf("order.paid", "order.refunded", "customer.updated", "invoice.finalized", "subscription.renewed"), "order.paid"},
	{"locale", oneOf("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "nl_NL"), "en_US"},
	{"account", between(100, 20000), "4821"},
	{"period", func(r *rand.Rand, now time.Time) string { return now.AddDate(0, -r.IntN(12), 0).Format("2006-01") }, "2025-01"},
	{"product", between(100000, 999999), "412345"},
	{"crmid", between(10000000, 99999999), "51234567"},
	{"pid", between(1000, 65000), "31337"},
	{"pid2", between(1000, 65000), "31338"},
	{"txid", between(5000000, 9000000), "7340123"},
	{"txid2", between(5000000, 9000000), "7340125"},
}

var placeholder = regexp.MustCompile(`\{([a-z][a-z0-9_]*)\}`)

// template is a text with {name} placeholders, split once into literal
// parts and the values between them, so that filling it per letter is a
// few appends.
type template struct {
	literals []string // len(refs)+1
	refs     []int    // indexes into values
}

// parseTemplate splits tmpl. An unknown name is an error: a typo must not
// reach the table.
func parseTemplate(tmpl string) (template, error) {
	var t template
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(tmpl, -1) {
		name := tmpl[m[2]:m[3]]
		i := valueIndex(name)
		if i < 0 {
			return template{}, fmt.Errorf("unknown placeholder {%s} in template %q", name, tmpl)
		}
		t.literals = append(t.literals, tmpl[last:m[0]])
		t.refs = append(t.refs, i)
		last = m[1]
	}
	t.literals = append(t.literals, tmpl[last:])
	return t, nil
}

func valueIndex(name string) int {
	for i, v := range values {
		if v.name == name {
			return i
		}
	}
	return -1
}

// fill writes the template with drawn[i] for each {values[i].name}.
func (t template) fill(drawn []string) string {
	if len(t.refs) == 0 {
		return t.literals[0]
	}
	size := 0
	for i, ref := range t.refs {
		size += len(t.literals[i]) + len(drawn[ref])
	}
	var b strings.Builder
	b.Grow(size + len(t.literals[len(t.refs)]))
	for i, ref := range t.refs {
		b.WriteString(t.literals[i])
		b.WriteString(drawn[ref])
	}
	b.WriteString(t.literals[len(t.refs)])
	return b.String()
}

// samples are the values' samples, in values' order, for fill.
func samples() []string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = v.sample
	}
	return s
}
