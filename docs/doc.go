// Package docs holds no code: it is the folder of the documentation's pages, and its tests
// (docs_test.go and the files beside it) run what the pages tell a user to run, so that a page
// that misses a change in the product fails the build.
//
// Every fenced block of README.md and docs/*.md says in its info string what it is, and so how it
// is checked (docs/README.md has the table); a block that does not fails TestBlocksClassified.
package docs
