// Package grouping puts dead letters into error groups: one group per
// failure (one bug, one incident), not per occurrence.
//
// A Grouper keys each letter by its task, its error class and the place it
// failed (Place: the innermost frames of the application's own code, as
// module and function, never line numbers or build paths), and reduces its
// message to a template learned online from the letters themselves, in the
// manner of the log-template miner Drain: data words are masked, words that
// differ between otherwise equal messages become variables once enough
// different ones are seen, and identifiers and codes never do. What it
// learns is kept through a Store, so that every process shares it; when a
// template widens to cover another group, the two merge and the older id
// survives. The package imports nothing of Redrive's.
package grouping
