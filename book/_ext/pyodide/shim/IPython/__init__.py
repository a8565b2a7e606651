"""The website's stand-in for IPython (Pyodide has none): only ``IPython.display``'s few
names that the book's cells use, so a cell the reader runs in the page shows what Jupyter
shows. Shipped in the site's tmath.zip only (book/_ext/pyodide_site.py); never installed."""
