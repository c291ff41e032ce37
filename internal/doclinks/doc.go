// Package doclinks holds no code: its test checks that every relative
// link in the repository's Markdown files ([text](path) and
// [text](path#anchor)) names a file or directory of the repository, and
// that an anchor into a Markdown file names one of its headings (GitHub's
// heading ids). Links with a scheme (https:, mailto:) are not followed.
package doclinks
