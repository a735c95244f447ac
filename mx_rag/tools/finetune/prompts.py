# SPDX-License-Identifier: Apache-2.0
"""Default prompts of the fine-tuning data generators (placeholders as the original's)."""

from __future__ import annotations

__all__ = ["GENERATE_QD_PROMPT", "REWRITE_QUERY_PROMPT", "SCORING_QD_PROMPT"]

# {question_number}, {doc}: answer lines "问题1：...", "问题2：..."
GENERATE_QD_PROMPT = """请阅读下面的文章，提出可以用这篇文章回答的问题。示例：
文章：气候变化使海洋温度和海平面上升，海水酸化，改变了鱼类的分布，也影响了渔业。
问题：气候变化对海洋和渔业有哪些影响？
文章：零售商用数据分析和机器学习了解顾客的购买习惯，据此优化库存和商品推荐。
问题：零售商如何利用人工智能改进库存和推荐？
请仿照示例，为下面的文章提出{question_number}个不同的问题，每个问题都要能从文章中找到答案。
文章：{doc}
按下面的格式输出，每行一个问题，冒号后直接写问题，不要再加编号：
问题1：...
问题2：...
"""

# {query}, {doc}: answer a relevance score between 0 and 1
SCORING_QD_PROMPT = """请判断文档能在多大程度上回答问题，给出0到1之间的相关性分数：
- 文档直接回答了问题：接近1；
- 文档与问题有关但没有直接回答：0到1之间，越间接分数越低；
- 文档与问题无关：0。
示例：
问题：小明昨天晚饭吃了什么？
文档：小明昨天和朋友聚餐，吃了火锅。
分数：0.98
问题：小红的数学成绩如何？
文档：小红上课积极，按时完成作业。
分数：0.12
请为下面的问题和文档打分，只输出保留两位小数的分数。
问题：{query}
文档：{doc}
分数："""

# {query}, {number}: answer lines "1. ...", "2. ..."
REWRITE_QUERY_PROMPT = """请把下面的问题改写成{number}个意思相同、说法不同的问题（换用同义词、调整句式或语气），
不要增加或删去信息。每行一个问题，用1.、2.编号。
问题：{query}"""
