// Package mask is the masking policy: which argument keys are sensitive,
// how their values are hidden in a letter's JSON arguments (Policy.Mask)
// and in its error text (Policy.MaskText), and how an edit that still
// shows the placeholder gets the real values back (RestoreMasked). It is
// pure (the standard library only, no SQL): the store keeps the policy in
// the database for the search, which applies the same rules in SQL, and
// the pages, the API and the notifications mask what they show with it.
package mask
