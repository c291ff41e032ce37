// Package doclinks holds no code: its tests check that every relative
// link in the repository's Markdown files ([text](path) and
// [text](path#anchor)) names a file or directory of the repository, and
// that an anchor into a Markdown file names one of its headings (GitHub's
// heading ids); links with a scheme (https:, mailto:) are not followed.
// They also check that README.md's "Repository layout" table names every
// package of the module and no other (TestReadmePackageMap), and that
// every import of a package points to a lower row of the layers drawn in
// docs/architecture.md (TestArchitectureLayers).
package doclinks
