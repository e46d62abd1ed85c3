// Command sigrecorder stands in for a game server in the hot-update tests: it appends the name of
// every SIGHUP, SIGUSR1 or SIGUSR2 it receives to the file named by its first argument, and
// creates that file empty once it is ready to receive them.
package main
