"""Reading documents from every input format: plain and compressed text, tables, JSON lines, spreadsheets,
Parquet and Arrow, web pages, e-books, Office and OpenDocument files, PDF, Markdown, notebooks, subtitles, and
archives of any of these. Each reader streams, is bounded, and refuses a broken or hostile file in one line.
Never imports torch: `tokenizer train` and `prepare` start fast and their workers fork light.

    corpus        the face: find a corpus's files, choose each one's reader, read its paragraphs (read_paragraphs),
                  or an inference command's texts (read_texts, read_passages, read_document, read_documents)
    catalog       the formats: one row each (suffixes, shape, reader, text or not, optional package)
    options       CorpusOptions: columns, cleaning, line breaks, filters, archive limits
    text          cleaning and sentence splitting
    textfiles     opening text: compression, bounds on expansion, encodings
    rows          reading rows of tables and JSON lines, streaming
    layouts       how a text file lays out documents and paragraphs (wrapped lines, Wikipedia, web pages, subtitles)
    spreadsheets  .xlsx and .ods sheets as tables
    documents     EPUB, Word, PowerPoint and OpenDocument files (zip packages of XML parts)
    zipparts      what the zip-package readers share: parts by name, relationships, ODF text
    pdf, markdown PDF files; Markdown and Jupyter notebooks
    archives      .zip and .tar members, streamed or copied out within limits
    filters       dedupe, length and characters-per-token filters, and what they dropped
"""
