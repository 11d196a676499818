"""Workflows as pictures: a graph model (`model`), built from a workflow folder or a Step
Functions state machine (`build`), coloured by what a store holds for one run (`status`),
written as Mermaid text (`mermaid`) or Graphviz DOT and rendered to SVG/PNG (`dot`)."""
