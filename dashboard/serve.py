"""The dashboard's server: `streamlit run dashboard/serve.py -- --results DIR|gs://bucket/prefix` (what `attnbench
dashboard` runs). It serves app.py as an st.App whose start-up imports what the page imports and reads the store into
the cache every session shares, before the server answers its first request: the first viewer after a start meets a
server as warm as the second one does. `streamlit run dashboard/app.py` serves the same page unprepared."""

from __future__ import annotations

import importlib
import sys
from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from dashboard.preload import PreloadPlotly

APP = "app.py"  # beside this file


def prepare(argv: list[str]) -> None:
    """Import the page's modules (pandas, plotly, runner) and read the store's listing and manifests."""
    importlib.import_module("dashboard.app")
    from dashboard import data

    data.load(data.results_uri(argv))


@asynccontextmanager
async def prepared(app: st.App):
    """st.App's lifespan: the server answers once `prepare` is done (a bucket that does not answer costs at most
    data.STORE_TIMEOUT_S, then the page says so)."""
    prepare(sys.argv[1:])
    yield


app = st.App(APP, lifespan=prepared, middleware=[Middleware(PreloadPlotly)])
