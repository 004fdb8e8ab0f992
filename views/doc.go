// Package views holds the console's templ components, its one layout and
// the view models they render. Every component is a pure function of its
// arguments: views never reach the database, the store or echo; handlers
// build the view models and pass them in.
package views
