"""attnbench's results dashboard (Streamlit): `attnbench dashboard` or `streamlit run dashboard/serve.py`."""
