"""Page sections: the parts of pages that would make a page more than glue, each a function the page calls: the sidebar
every page draws first (``sidebar``) and the choices it returns (``app_context``), the input's analysis with its
notices (``input_analysis``), the second model beside the first (``compare``), Figure 1 of the paper
(``architecture``), the Embeddings page's positions (``positions``), the Attention, Decoding and Explain pages'
sections (``attention``, ``decoding``, ``explain``, ``inside_head``), the Training page's (``training_progress``,
``training_recipe``, ``training_snapshots``, ``runs_page``), and the navigation of the Heads and Patching pages
(``heads_navigation``).
"""
