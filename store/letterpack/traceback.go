package letterpack

import (
	"crypto/sha256"
	"io"
	"strings"
)

const (
	// ValueMark stands for one of the letter's values in a template, and
	// separates the values.
	ValueMark = '\x01'
	// MessageMark stands for the letter's error message in a template.
	MessageMark = '\x02'
	// minMessage is the shortest message worth a mark: a shorter one would
	// mark some unrelated word of the traceback as often as the message.
	minMessage = 4
	// minDigits is how many digits make a word a value: ids, amounts,
	// timestamps, addresses and ports vary between occurrences, while the
	// words of code (python3, utf8, line 57, HTTP/1.1, s3) rarely hold three.
	minDigits = 3
)

// marks are the bytes a stored template gives a meaning to.
const marks = string(rune(ValueMark)) + string(rune(MessageMark))

// Packed is a traceback cut for storage.
type Packed struct {
	// Hash names the template: the first 16 bytes of its SHA-256, which an
	// adversary cannot collide so that one letter shows another's traceback.
	Hash []byte
	// Template is what letters of the same shape share.
	Template string
	// Values are the letter's own values, joined by ValueMark.
	Values string
}

// Pack cuts traceback into a template and the letter's values. ok is false
// when the traceback is better stored whole: empty, or holding one of the
// marks already.
func Pack(traceback, message string) (p Packed, ok bool) {
	if traceback == "" || strings.IndexByte(traceback, ValueMark) >= 0 || strings.IndexByte(traceback, MessageMark) >= 0 {
		return Packed{}, false
	}
	before, after := traceback, ""
	if len(message) >= minMessage {
		if i := strings.LastIndex(traceback, message); i >= 0 {
			before, after = traceback[:i], traceback[i+len(message):]
		}
	}
	var tpl, values strings.Builder
	tpl.Grow(len(traceback))
	cutValues(&tpl, &values, before)
	if len(before) < len(traceback) {
		tpl.WriteByte(MessageMark)
		cutValues(&tpl, &values, after)
	}
	template := tpl.String()
	h := sha256.New()
	io.WriteString(h, template) // a hash's Write never fails
	return Packed{Hash: h.Sum(nil)[:16], Template: template, Values: values.String()}, true
}

// cutValues copies text into tpl with each value word replaced by
// ValueMark, and appends the words to values. The text between values is
// copied in one piece.
func cutValues(tpl, values *strings.Builder, text string) {
	copied := 0
	for rest := 0; rest < len(text); {
		start, end, digits := nextWord(text[rest:])
		if start < 0 {
			break
		}
		start, end = rest+start, rest+end
		if digits >= minDigits {
			tpl.WriteString(text[copied:start])
			tpl.WriteByte(ValueMark)
			if values.Len() > 0 {
				values.WriteByte(ValueMark)
			}
			values.WriteString(text[start:end])
			copied = end
		}
		rest = end
	}
	tpl.WriteString(text[copied:])
}

// nextWord finds the first word of text (a run of ASCII letters, digits,
// '_' and '-') and counts its digits; start is -1 when there is none.
func nextWord(text string) (start, end, digits int) {
	start = -1
	for i := 0; i < len(text); i++ {
		switch wordBytes[text[i]] {
		case notWord:
			if start >= 0 {
				return start, i, digits
			}
			continue
		case digit:
			digits++
		}
		if start < 0 {
			start = i
		}
	}
	if start < 0 {
		return -1, -1, 0
	}
	return start, len(text), digits
}

// The kinds of byte nextWord tells apart, by byte.
const (
	notWord = iota
	letter
	digit
)

var wordBytes = func() (kinds [256]uint8) {
	for c := range 256 {
		switch {
		case c >= '0' && c <= '9':
			kinds[c] = digit
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '-':
			kinds[c] = letter
		}
	}
	return kinds
}()

// Unpack puts a packed traceback back together: template with its marks
// replaced by values, in order, and by message.
func Unpack(template, values, message string) string {
	var b strings.Builder
	b.Grow(len(template) + len(values) + len(message))
	for {
		i := strings.IndexAny(template, marks)
		if i < 0 {
			b.WriteString(template)
			return b.String()
		}
		b.WriteString(template[:i])
		if template[i] == MessageMark {
			b.WriteString(message)
		} else {
			v, rest, _ := strings.Cut(values, string(rune(ValueMark)))
			b.WriteString(v)
			values = rest
		}
		template = template[i+1:]
	}
}
