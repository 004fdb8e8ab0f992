package dlq

import (
	"github.com/redrive/redrive/mask"
)

// MaskLetter masks a letter for display with p: its arguments and its
// error message, traceback and each attempt's message, traceback and logs. The
// secrets are read from the real arguments, so call it on the letter as
// stored.
func MaskLetter(p mask.Policy, d *DeadLetter) {
	var t mask.TextMask
	d.Args, d.Kwargs, t = p.MaskArgs(d.Args, d.Kwargs)
	d.ErrorMessage = t.Apply(d.ErrorMessage)
	d.Traceback = t.Apply(d.Traceback)
	d.History = maskAttempts(t, d.History)
}

// MaskJob masks a job for display like MaskLetter: arguments, last error
// and the error history.
func MaskJob(p mask.Policy, j *Job) {
	var t mask.TextMask
	j.Args, j.Kwargs, t = p.MaskArgs(j.Args, j.Kwargs)
	if j.LastError != nil {
		s := t.Apply(*j.LastError)
		j.LastError = &s
	}
	j.Errors = maskAttempts(t, j.Errors)
}

func maskAttempts(t mask.TextMask, as Attempts) Attempts {
	if len(as) == 0 {
		return as
	}
	out := make(Attempts, len(as))
	for i, a := range as {
		a.Message, a.Traceback, a.Logs = t.Apply(a.Message), t.Apply(a.Traceback), t.Apply(a.Logs)
		out[i] = a
	}
	return out
}
