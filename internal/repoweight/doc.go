// Package repoweight holds no code: its tests keep the repository light.
// Every version of a tracked file stays in the history for good (84 copies of
// the planner's WebAssembly module once made 104 MB of its 123 MB), so
// .ci/large-files refuses a tracked file over 1 MB that .ci/large-files.txt
// does not list with its reason, and a commit that changes the generator,
// after every go generate, adds no such file.
package repoweight
