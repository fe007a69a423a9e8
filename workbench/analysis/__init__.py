"""Pure analyses: DataFrames in, DataFrames (or small dicts) out.

Nothing here imports torch, plotly or ipywidgets, prints, or mutates its inputs.
"""
