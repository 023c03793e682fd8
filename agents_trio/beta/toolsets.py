"""``agents_trio.beta.toolsets``: LiveKit's tool-search toolsets, for agents with many tools.

:class:`ToolSearchToolset` offers the LLM one ``tool_search`` function instead of every tool;
a search loads the best matches (a matched tool of a nested toolset loads that whole toolset)
and the next LLM step sees them. :class:`ToolProxyToolset` keeps the tool list fixed
(``tool_search`` answers with the matches' schemas, ``call_tool`` runs one by name), which
keeps a provider's prompt cache warm.

Ranking is pluggable (:class:`SearchStrategy`); the default is BM25 over each tool's name
(weight 3), description (2) and parameter names and descriptions (1), as LiveKit ranks them.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from .._errors import ToolError
from ..run_context import RunContext
from ..tools import FunctionTool, function_tool, parse_arguments
from ..toolsets import ProviderTool, Toolset, flatten_tools

__all__ = ["BM25SearchStrategy", "KeywordSearchStrategy", "SearchItem", "SearchStrategy",
           "ToolProxyToolset", "ToolSearchToolset"]


@dataclass
class SearchItem:
    """One searchable tool: what it is called and says, and what a match loads (``source``:
    the tool itself, or the top-level toolset it belongs to)."""

    source: Any
    name: str
    description: str
    parameters: dict[str, str] = field(default_factory=dict)  # name -> description
    index_data: Any = field(default=None, repr=False)


class SearchStrategy(Protocol):
    """How a search ranks the items (any method may be async)."""

    def build_index(self, items: list[SearchItem]) -> None | Awaitable[None]: ...

    def search(self, query: str, items: list[SearchItem], max_results: int
               ) -> list[SearchItem] | Awaitable[list[SearchItem]]: ...

    def cleanup(self) -> None | Awaitable[None]: ...


async def _maybe_await(value: Any) -> Any:  # noqa: ANN401 - whatever the strategy returns
    return await value if inspect.isawaitable(value) else value


_WORD = re.compile(r"[^\W_]+")
_SYMBOL_TERM = re.compile(r"[^\W_]+[+#]+")      # c++, c#: the symbols are part of the term
_PLAIN_TOKEN = re.compile(r"([^\W_]+)[.,!?;:']*")


def _terms(text: str) -> list[str]:
    """Lower-case words (underscores split them) and symbol-bearing terms as they are."""
    low = text.lower()
    return _WORD.findall(low) + _SYMBOL_TERM.findall(low)


def _query_keywords(query: str) -> list[str]:
    """A keyword query's tokens: plain words lose trailing punctuation; anything else (a
    regular expression, ``c++``) is kept as typed."""
    keywords: list[str] = []
    for token in query.lower().split():
        plain = _PLAIN_TOKEN.fullmatch(token)
        keywords.append(plain.group(1) if plain else token)
    return list(dict.fromkeys(keywords))


class KeywordSearchStrategy:
    """Each keyword (a regular expression when it is one) scores 3 for a match in the name,
    2 in the description and 1 in the parameters."""

    def build_index(self, items: list[SearchItem]) -> None:
        for item in items:
            item.index_data = (
                item.name.lower(), item.description.lower(),
                " ".join(f"{k} {v}" for k, v in item.parameters.items()).lower())

    def search(self, query: str, items: list[SearchItem], max_results: int
               ) -> list[SearchItem]:
        patterns = []
        for keyword in _query_keywords(query):
            try:
                patterns.append(re.compile(keyword))
            except re.error:
                patterns.append(re.compile(re.escape(keyword)))
        if not patterns:
            return []
        scored = []
        for item in items:
            if item.index_data is None:
                self.build_index([item])
            name, description, params = item.index_data
            score = sum(3.0 * bool(p.search(name)) + 2.0 * bool(p.search(description))
                        + 1.0 * bool(p.search(params)) for p in patterns)
            if score > 0:
                scored.append((score, item))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return [item for _, item in scored[:max_results]]

    def cleanup(self) -> None:
        return None


class BM25SearchStrategy:
    """Okapi BM25 over each tool's terms (name ×3, description ×2, parameters ×1).

    Args:
        k1: Term-frequency saturation.
        b: Document-length normalisation (0–1).
    """

    def __init__(self, *, k1: float = 1.5, b: float = 0.75) -> None:
        self._k1 = k1
        self._b = b
        self._avg_len = 0.0
        self._idf: dict[str, float] = {}

    def build_index(self, items: list[SearchItem]) -> None:
        document_frequency: dict[str, int] = {}
        for item in items:
            terms = self._document(item)
            counts: dict[str, float] = {}
            for term in terms:
                counts[term] = counts.get(term, 0.0) + 1.0
            item.index_data = (counts, len(terms))
            for term in counts:
                document_frequency[term] = document_frequency.get(term, 0) + 1
        n = len(items)
        self._avg_len = sum(item.index_data[1] for item in items) / n if n else 0.0
        self._idf = {term: math.log((n - df + 0.5) / (df + 0.5) + 1.0)
                     for term, df in document_frequency.items()}

    def search(self, query: str, items: list[SearchItem], max_results: int
               ) -> list[SearchItem]:
        terms = _terms(query)
        if not terms:
            return []
        scored = [(score, item) for item in items
                  if (score := self._score(item, terms)) > 0]
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return [item for _, item in scored[:max_results]]

    def cleanup(self) -> None:
        self._idf.clear()
        self._avg_len = 0.0

    @staticmethod
    def _document(item: SearchItem) -> list[str]:
        params: list[str] = []
        for name, description in item.parameters.items():
            params += _terms(name) + _terms(description)
        return _terms(item.name) * 3 + _terms(item.description) * 2 + params

    def _score(self, item: SearchItem, terms: list[str]) -> float:
        if item.index_data is None:
            raise RuntimeError("build_index() must run before search()")
        counts, length = item.index_data
        norm = (1.0 - self._b + self._b * length / self._avg_len) if self._avg_len > 0 else 1.0
        score = 0.0
        for term in terms:
            idf = self._idf.get(term)
            if idf is None:
                continue
            tf = counts.get(term, 0.0)
            score += idf * tf * (self._k1 + 1.0) / (tf + self._k1 * norm)
        return score


_SEARCH_DESCRIPTION = (
    "Find tools for a task by describing it in keywords. The tools found can be called "
    "after this search; search first when the tool you need is not available yet.")
_QUERY_DESCRIPTION = "space-separated keywords matched against tool names and descriptions"
_PROXY_SEARCH_DESCRIPTION = (
    "Find tools for a task by describing it in keywords; answers with the JSON schemas of "
    "the tools found, which call_tool then runs.")
_CALL_DESCRIPTION = (
    "Run a tool by its name with its parameters (search with tool_search first to learn "
    "the tools and their schemas).")


def _parameter_docs(tool: FunctionTool) -> dict[str, str]:
    model = tool.args_model
    if model is not None:
        return {name: f.description or "" for name, f in model.model_fields.items()}
    properties = tool.parameters_schema.get("properties", {})
    return {name: prop.get("description", "") if isinstance(prop, dict) else ""
            for name, prop in properties.items()}


class ToolSearchToolset(Toolset):
    """Wraps tools and toolsets behind one ``tool_search`` function; a search loads the
    matches (replacing the previous ones) for the LLM's next step.

    Args:
        id: The toolset's id.
        tools: The tools and toolsets to search.
        max_results: How many tools a search may load.
        search_strategy: The ranking (default :class:`BM25SearchStrategy`).
        search_description: The ``tool_search`` description the LLM sees.
        query_description: Its ``query`` parameter's description.

    Raises:
        ValueError: ``max_results`` below 1.
    """

    def __init__(self, *, id: str, tools: Sequence[Any] | None = None, max_results: int = 5,
                 search_strategy: SearchStrategy | None = None,
                 search_description: str | None = None,
                 query_description: str | None = None) -> None:
        super().__init__(id=id, tools=tools)
        if max_results < 1:
            raise ValueError(f"max_results must be at least 1, got {max_results}")
        flatten_tools(self._searched())  # a bad tool or a duplicate name fails here
        self._strategy: SearchStrategy = search_strategy or BM25SearchStrategy()
        self._max_results = max_results
        self._loaded: list[Any] = []
        self._items: list[SearchItem] = []
        self._indexed = False
        self._lock = trio.Lock()
        self._search_tool = function_tool(self._on_search, raw_schema={
            "name": "tool_search",
            "description": search_description or _SEARCH_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"query": {
                "type": "string", "description": query_description or _QUERY_DESCRIPTION}},
                "required": ["query"]}})

    @property
    def tools(self) -> list[Any]:
        """``tool_search``, then the tools the last search loaded."""
        return [self._search_tool, *self._loaded]

    def _searched(self) -> list[Any]:
        return list(super().tools)

    async def setup(self, *, reload: bool = False) -> ToolSearchToolset:
        """Set up the wrapped toolsets and index every tool (once, unless ``reload``).

        Cancellation: cancels the setups and the indexing.
        """
        async with self._lock:
            if self._indexed and not reload:
                return self
            await super().setup()
            self._items = [item for source in self._searched()
                           for item in _search_items(source)]
            await _maybe_await(self._strategy.build_index(self._items))
            self._indexed = True
        return self

    async def aclose(self) -> None:
        """Close the wrapped toolsets and forget the index and the loaded tools.

        Cancellation: cancels the closes.
        """
        await super().aclose()
        self._indexed = False
        self._items.clear()
        self._loaded.clear()
        await _maybe_await(self._strategy.cleanup())

    async def search(self, query: str) -> list[Any]:
        """The tools (or whole toolsets) matching ``query``, best first, without duplicates.

        Raises:
            ToolError: An empty query.

        Cancellation: cancels an async strategy's search.
        """
        if not query.strip():
            raise ToolError("query cannot be empty")
        found = await _maybe_await(self._strategy.search(query, self._items,
                                                         self._max_results))
        return list(dict.fromkeys(item.source for item in found))

    async def _on_search(self, raw_arguments: dict[str, object]) -> str:
        query = str(raw_arguments.get("query", ""))
        found = await self.search(query)
        if not found:
            raise ToolError(f"No tools found matching '{query}'.")
        self._loaded = found
        return "Tools loaded successfully."


def _search_items(source: Any) -> list[SearchItem]:  # noqa: ANN401 - a tool or a toolset
    items = []
    for tool in flatten_tools([source]):
        if isinstance(tool, FunctionTool):
            items.append(SearchItem(source=source, name=tool.name,
                                    description=tool.description or "",
                                    parameters=_parameter_docs(tool)))
        elif isinstance(tool, ProviderTool) or isinstance(getattr(tool, "id", None), str):
            items.append(SearchItem(source=source, name=tool.id, description=""))
    return items


def _schema_of(tool: FunctionTool) -> dict[str, Any]:
    model = tool.args_model
    parameters = model.model_json_schema() if model is not None else tool.parameters_schema
    return {"name": tool.name, "description": tool.description or "",
            "parameters": parameters}


class ToolProxyToolset(ToolSearchToolset):
    """Two fixed tools: ``tool_search`` answers with the matching tools' JSON schemas (one per
    line), ``call_tool`` runs a wrapped tool by name.

    Args:
        call_description: The ``call_tool`` description the LLM sees.
        (the rest): as :class:`ToolSearchToolset`.
    """

    def __init__(self, *, id: str, tools: Sequence[Any] | None = None, max_results: int = 5,
                 search_strategy: SearchStrategy | None = None,
                 search_description: str | None = None,
                 query_description: str | None = None,
                 call_description: str | None = None) -> None:
        super().__init__(id=id, tools=tools, max_results=max_results,
                         search_strategy=search_strategy,
                         search_description=search_description or _PROXY_SEARCH_DESCRIPTION,
                         query_description=query_description)
        self._call_tool = function_tool(self._on_call, raw_schema={
            "name": "call_tool",
            "description": call_description or _CALL_DESCRIPTION,
            "parameters": {"type": "object", "properties": {
                "name": {"type": "string", "description": "the tool's name"},
                "parameters": {"type": "object", "description": "the tool's arguments"}},
                "required": ["name", "parameters"]}})

    @property
    def tools(self) -> list[Any]:
        """Always ``tool_search`` and ``call_tool``."""
        return [self._search_tool, self._call_tool]

    async def _on_search(self, raw_arguments: dict[str, object]) -> str:
        query = str(raw_arguments.get("query", ""))
        found = await self.search(query)
        schemas = [_schema_of(t) for t in flatten_tools(found) if isinstance(t, FunctionTool)]
        if not schemas:
            raise ToolError(f"No tools found matching '{query}'.")
        return "\n".join(json.dumps(schema) for schema in schemas)

    async def _on_call(self, ctx: RunContext[Any], raw_arguments: dict[str, object]) -> object:
        name = str(raw_arguments.get("name", ""))
        parameters = raw_arguments.get("parameters")
        if not name:
            raise ToolError("tool name cannot be empty")
        if parameters is None:
            raise ToolError("parameters is required")
        if not isinstance(parameters, (dict, str)):
            raise ToolError("parameters must be a dictionary or a string")
        tools = {t.name: t for t in flatten_tools(self._searched())
                 if isinstance(t, FunctionTool)}
        tool = tools.get(name)
        if tool is None:
            raise ToolError(f"unknown tool '{name}', use tool_search to discover available "
                            "tools")
        kwargs: dict[str, Any] = parse_arguments(
            tool, parameters if isinstance(parameters, str) else json.dumps(parameters))
        kwargs.update(dict.fromkeys(tool.context_params, ctx))
        return await tool(**kwargs)
