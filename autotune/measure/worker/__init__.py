"""What runs inside a measurement worker process: the serving loop and its request handlers.

The rule of this package: it imports only the loop IR (`autotune.ir`), the code generators
(`autotune.codegen`), `autotune.dtype`, numpy and the wire protocol. A worker is handed data, not
recipes: a build request carries serialized loop IR, a run request carries object code and the
path of the task's check data (inputs, expected outputs, tolerances) written by the parent. So a
worker never imports a template or the user's code, and a computation defined in a notebook, an
`exec`'d string or a graph built at run time is measured like any other.
"""
