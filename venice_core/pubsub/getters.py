"""C-level getters of a consumed message's fields: `map` of one over a consumed batch (its keys, values, offsets or
errors at once) runs no Python bytecode per message, which a comprehension calling the method would."""

from __future__ import annotations

from operator import methodcaller

ERROR, KEY, VALUE, OFFSET = methodcaller("error"), methodcaller("key"), methodcaller("value"), methodcaller("offset")
