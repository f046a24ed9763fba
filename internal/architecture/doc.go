// Package architecture holds no code: its tests keep docs/architecture.md
// true. Each claim the page makes about the code (which packages are public,
// which import pgx, which hold SQL text, how long functions are, who imports
// whom) is read from the page and checked against the source, so that the
// page fails the build when the code drifts from it.
package architecture
