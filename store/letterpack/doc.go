// Package letterpack is how a letter's traceback is stored: once per
// shape, not once per letter, and put back byte for byte when the letter
// is read.
//
// The letters of one failure share their traceback but for the values in
// it: the error message on its last line, an order's id, a request's id, a
// line number. Pack cuts a traceback into a template, which those letters
// share and the store keeps once (keyed by its hash), and the letter's own
// values; Unpack puts them back together. What counts as a value only
// decides how well letters share a template, never what is read back. A
// template marks each value with ValueMark and the error message with
// MessageMark; a letter's values are joined by ValueMark. A traceback that
// already holds either byte is not packed: it is stored whole.
package letterpack
