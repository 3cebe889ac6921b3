// Command notadriver is a test fixture: an ordinary program, not a Strata
// driver. Loading it must fail with a clear error.
package main

import "fmt"

func main() { fmt.Println("hello, I am not a plugin") }
